import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { configureNeon } from './drivers/neon-config.js';
import { createNeonHttpPool } from './drivers/neon-http.js';
import { createNeonWsPool, withNeonSession } from './drivers/neon-ws.js';
import { createPgDriver } from './drivers/pg.js';
import { createPgliteDriver } from './drivers/pglite.js';
import type { DatabaseDriver } from './types.js';

export interface DriverEnvironment {
  /** A WebSocket constructor for the Neon driver where the runtime has no global one (Node 20). */
  webSocket?: unknown;
}

export function createDriver(
  config: Config,
  log: Logger,
  environment: DriverEnvironment = {},
): DatabaseDriver {
  const { database } = config;
  if (database.driver === 'pglite') return createPgliteDriver({ dataDir: database.dataDir });
  if (database.driver === 'pg') {
    return createPgDriver({
      url: database.url,
      poolMax: config.poolMax,
      maxLifetimeSeconds: config.poolMaxLifetimeSeconds,
      probeTimeoutMs: config.probeTimeoutMs,
      log,
    });
  }

  configureNeon({ localProxy: database.neonLocalProxy, webSocket: environment.webSocket });
  const { url, driver } = database;
  const session = <T>(fn: Parameters<typeof withNeonSession<T>>[1]) => withNeonSession(url, fn);
  return {
    name: driver,
    createPool(role) {
      // On Neon the probe always goes over HTTP: it has no connection that a failover could pin.
      if (role === 'probe')
        return createNeonHttpPool({ url, timeoutMs: config.probeTimeoutMs, withSession: session });
      if (driver === 'neon-http') return createNeonHttpPool({ url, withSession: session });
      return createNeonWsPool(
        {
          url,
          max: config.poolMax,
          maxLifetimeSeconds: config.poolMaxLifetimeSeconds,
          connectionTimeoutMs: Math.max(config.probeTimeoutMs, 10_000),
          log,
        },
        role,
      );
    },
    ready: async () => {},
    close: async () => {},
  };
}
