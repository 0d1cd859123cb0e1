// `npm run org:create -- --name "Acme"`: creates an organization and prints its API key once, as JSON.
// `npm run org:remove -- --id <uuid>`. Uses the same DATABASE_URL (and migrations) as the server;
// running servers pick the change up within REGISTRY_REFRESH_MS.
import { parseArgs } from 'node:util';
import { migrations } from '../src/app/migrations.gen.js';
import { createOrganization, removeOrganization } from '../src/app/organizations.js';
import { loadConfig } from '../src/platform/config.js';
import { createDriver } from '../src/platform/db/driver.js';
import { migrate } from '../src/platform/db/migrate.js';
import { createLogger } from '../src/platform/log.js';

const [command, ...rest] = process.argv.slice(2);
const { values } = parseArgs({ args: rest, options: { name: { type: 'string' }, id: { type: 'string' } } });
const log = createLogger('warn');

const fail = (message: string): never => {
  console.error(JSON.stringify({ error: message }));
  process.exit(2);
};

if (command === 'create' && !values.name?.trim()) fail('usage: npm run org:create -- --name "Acme"');
if (command === 'remove' && !values.id) fail('usage: npm run org:remove -- --id <uuid>');
if (command !== 'create' && command !== 'remove') fail('usage: tools/org.ts create|remove ...');

const config = loadConfig(process.env);
const driver = createDriver(config, log);
await driver.ready();
const pool = driver.createPool('app');
try {
  await migrate(pool, migrations, log);
  if (command === 'create') {
    console.log(JSON.stringify(await createOrganization(pool.db, (values.name ?? '').trim())));
  } else {
    const removed = await removeOrganization(pool.db, values.id ?? '');
    console.log(JSON.stringify({ id: values.id, removed }));
    if (!removed) process.exitCode = 1;
  }
} finally {
  await pool.end();
  await driver.close();
}
