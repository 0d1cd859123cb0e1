// `npm run db:migrate`: applies the bundled migrations under the advisory lock, over a session
// (node-postgres, or Neon's WebSocket driver with DATABASE_DRIVER=neon-ws), for deploy pipelines
// where the runtime cannot migrate at boot (Workers). Never over neon-http: it cannot roll back.
import { migrations } from '../src/app/migrations.gen.js';
import { loadConfig } from '../src/platform/config.js';
import { createDriver } from '../src/platform/db/driver.js';
import { migrate } from '../src/platform/db/migrate.js';
import { createLogger } from '../src/platform/log.js';

const config = loadConfig({
  ...process.env,
  DATABASE_DRIVER: process.env.DATABASE_DRIVER === 'neon-http' ? 'neon-ws' : process.env.DATABASE_DRIVER,
});
const log = createLogger(config.logLevel);
const driver = createDriver(config, log);
await driver.ready();
const pool = driver.createPool('app');
try {
  const { applied } = await migrate(pool, migrations, log, { timeoutMs: config.migrationLockTimeoutMs });
  console.log(JSON.stringify({ applied, latest: migrations.at(-1)?.tag }));
} finally {
  await pool.end();
  await driver.close();
}
