// One database migrated once per run, copied for every file that needs a migrated database and is not
// about migrating (migratedDatabase in databases.ts): CREATE DATABASE … TEMPLATE copies its files, where
// each server's boot would otherwise apply every migration to an empty database again.
import { createLogger, loadConfig } from '@honest-health/platform';
import { DatabaseHandle, migrate } from '@honest-health/platform/db';
import { openDriver } from '../../src/app/databases.js';
import { migrations } from '../../src/app/migrations.gen.js';
import { MIGRATED_TEMPLATE } from './databases.js';
import type { Cluster } from './postgres.js';

/** Creates and migrates the template; nothing stays connected to it, so it can be copied. */
export async function prepareMigratedTemplate(cluster: Cluster): Promise<void> {
  await cluster.query(`CREATE DATABASE ${MIGRATED_TEMPLATE}`);
  const log = createLogger('warn');
  const driver = openDriver(loadConfig({ DATABASE_URL: cluster.url(MIGRATED_TEMPLATE) }), log);
  await driver.ready();
  const handle = new DatabaseHandle(driver, 'app', log);
  try {
    await migrate(handle.pool, migrations, log);
  } finally {
    await handle.close();
  }
}
