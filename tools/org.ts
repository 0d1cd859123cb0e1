// `npm run org:create -- --name "Acme" [--allow-duplicate]`: creates an organization and prints its
// API key once, as JSON. `npm run org:list`: every organization (no keys), as JSON.
// `npm run org:remove -- --id <uuid>`. Uses the same DATABASE_URL (and migrations) as the server;
// running servers pick the change up within REGISTRY_REFRESH_MS. On the embedded database these
// refuse to run while a server holds it (one process at a time can open PGlite).
// Exit codes: 0 done, 1 failed (or nothing removed, or a duplicate name), 2 usage.
import { parseArgs } from 'node:util';
import { migrations } from '../src/app/migrations.gen.js';
import {
  createOrganization,
  listOrganizations,
  organizationsNamed,
  removeOrganization,
} from '../src/app/organizations.js';
import { loadConfig } from '../src/platform/config.js';
import { createDriver } from '../src/platform/db/driver.js';
import { migrate } from '../src/platform/db/migrate.js';
import type { Database } from '../src/platform/db/types.js';
import { createLogger } from '../src/platform/log.js';
import { EXIT_FAILURE, runCli, UsageError } from './cli.js';

const USAGE =
  'usage: npm run org:create -- --name "Acme" [--allow-duplicate] | npm run org:list | npm run org:remove -- --id <uuid>';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type Command = (db: Database) => Promise<void>;

function parse(argv: string[]): Command {
  const [command, ...args] = argv;
  if (command === 'create') {
    const { values } = parseArgs({
      args,
      strict: true,
      options: { name: { type: 'string' }, 'allow-duplicate': { type: 'boolean' } },
    });
    const name = values.name?.trim();
    if (!name) throw new UsageError('--name is required and must not be blank');
    if (name.length > 255) throw new UsageError('--name must be at most 255 characters');
    return async (db) => {
      const same = await organizationsNamed(db, name);
      if (same.length > 0 && !values['allow-duplicate']) {
        process.stderr.write(
          `org:create: an organization named "${name}" already exists (id ${same.map((o) => o.id).join(', ')}); ` +
            'pass --allow-duplicate to create another\n',
        );
        process.exitCode = EXIT_FAILURE;
        return;
      }
      console.log(JSON.stringify(await createOrganization(db, name)));
    };
  }
  if (command === 'list') {
    parseArgs({ args, strict: true, options: {} });
    return async (db) => console.log(JSON.stringify(await listOrganizations(db)));
  }
  if (command === 'remove') {
    const { values } = parseArgs({ args, strict: true, options: { id: { type: 'string' } } });
    const id = values.id;
    if (id === undefined) throw new UsageError('--id is required');
    if (!UUID.test(id))
      throw new UsageError(`--id must be an organization id (a UUID), not "${id.slice(0, 40)}"`);
    return async (db) => {
      const removed = await removeOrganization(db, id);
      console.log(JSON.stringify({ id, removed }));
      if (!removed) process.exitCode = EXIT_FAILURE;
    };
  }
  throw new UsageError(command === undefined ? 'no command' : `unknown command "${command}"`);
}

await runCli('org', USAGE, async () => {
  // Arguments first: a usage error never touches the database.
  const run = parse(process.argv.slice(2));
  const config = loadConfig(process.env);
  const log = createLogger('warn');
  const driver = createDriver(config, log);
  try {
    await driver.ready();
    const pool = driver.createPool('app');
    try {
      await migrate(pool, migrations, log);
      await run(pool.db);
    } finally {
      await pool.end();
    }
  } finally {
    await driver.close();
  }
});
