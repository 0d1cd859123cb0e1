// `npm run db:migrate`: applies the bundled migrations under the advisory lock, over a session
// (node-postgres, or Neon's WebSocket driver with DATABASE_DRIVER=neon-ws), for deploy pipelines
// where the runtime cannot migrate at boot (Workers). Never over neon-http: it cannot roll back.
// Without DATABASE_URL it refuses (a deploy pipeline that lost its secret must not "succeed" on the
// developer's embedded database); `npm run db:migrate -- --local` migrates .data/pglite on purpose.
// Exit codes: 0 migrated, 1 failed, 2 usage.
import { parseArgs } from 'node:util';
import { createLogger, loadConfig, poisonReason } from '@honest-health/platform';
import { migrateAtDeploy } from '@honest-health/platform/tools';
import { processDatabases } from '../src/app/databases.js';
import { identity } from '../src/app/identity.js';
import { migrations } from '../src/app/migrations.gen.js';
import { runCli, UsageError } from './cli.js';

const USAGE =
  'usage: DATABASE_URL=postgres://... npm run db:migrate [-- --allow-contract], or npm run db:migrate -- --local';

await runCli('db:migrate', USAGE, async () => {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    strict: true,
    options: { local: { type: 'boolean' }, 'allow-contract': { type: 'boolean' } },
  });
  const config = loadConfig({
    ...process.env,
    DATABASE_DRIVER: process.env.DATABASE_DRIVER === 'neon-http' ? 'neon-ws' : process.env.DATABASE_DRIVER,
  });
  const local = config.database.driver === 'pglite';
  if (local && !values.local) {
    throw new UsageError(
      `DATABASE_URL is not set, so this would migrate the embedded database in ${'dataDir' in config.database ? config.database.dataDir : '.data/pglite'}; set DATABASE_URL, or pass --local to mean it`,
    );
  }
  if (!local && values.local)
    throw new UsageError('--local is for the embedded database, but DATABASE_URL is set');
  const log = createLogger(config.logLevel, {}, undefined, poisonReason);
  const result = await migrateAtDeploy(config, log, {
    databases: processDatabases,
    identity,
    migrations,
    allowContract: values['allow-contract'] === true,
  });
  console.log(JSON.stringify(result));
});
