import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { createPgDriver } from './drivers/pg.js';
import { createPgliteDriver } from './drivers/pglite.js';
import type { DatabaseDriver } from './types.js';

export function createDriver(config: Config, log: Logger): DatabaseDriver {
  const { database } = config;
  switch (database.driver) {
    case 'pglite':
      return createPgliteDriver({ dataDir: database.dataDir });
    case 'pg':
      return createPgDriver({
        url: database.url,
        poolMax: config.poolMax,
        maxLifetimeSeconds: config.poolMaxLifetimeSeconds,
        probeTimeoutMs: config.probeTimeoutMs,
        log,
      });
  }
}
