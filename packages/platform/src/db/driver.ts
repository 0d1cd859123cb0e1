import type { Config } from '../util/config.js';
import { type AppIdentity, lockFileOf, resolveIdentity } from '../util/identity.js';
import type { Logger } from '../util/log.js';
import { createNeonDriver } from './drivers/neon.js';
import { createPgDriver } from './drivers/pg.js';
import { createPgliteDriver } from './drivers/pglite.js';
import type { DatabaseDriver } from './types.js';

// Each driver imports its modules in ready(): loading every driver (PGlite's WASM glue, two Postgres
// clients, several Drizzle dialects) would cost a few hundred milliseconds of boot for nothing.
export function createDriver(config: Config, log: Logger, app?: AppIdentity): DatabaseDriver {
  const { database } = config;
  const identity = resolveIdentity(app);
  if (database.driver === 'pglite') {
    return createPgliteDriver({ dataDir: database.dataDir, lockFile: lockFileOf(identity) });
  }
  if (database.driver === 'pg') {
    return createPgDriver({
      url: database.url,
      poolMax: config.poolMax,
      maxLifetimeSeconds: config.poolMaxLifetimeSeconds,
      probeTimeoutMs: config.probeTimeoutMs,
      pooler: config.databasePooler,
      applicationName: identity.name,
      log,
    });
  }

  return createNeonDriver(config, database, log);
}
