import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { createPgDriver } from './drivers/pg.js';
import { createPgliteDriver } from './drivers/pglite.js';
import type { DatabaseDriver, SqlSession } from './types.js';

export interface DriverEnvironment {
  /** A WebSocket constructor for the Neon driver where the runtime has no global one (Node 20). */
  webSocket?: unknown;
}

// Each driver imports its modules in ready(): loading every driver (PGlite's WASM glue, two Postgres
// clients, several Drizzle dialects) would cost a few hundred milliseconds of boot for nothing.
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

  const { url, driver } = database;
  type NeonModules = [
    typeof import('./drivers/neon-config.js'),
    typeof import('./drivers/neon-http.js'),
    typeof import('./drivers/neon-ws.js'),
  ];
  let neon: NeonModules | undefined;
  const loaded = (): NeonModules => {
    if (!neon) throw new Error(`the ${driver} driver is not ready`);
    return neon;
  };
  const session = <T>(fn: (session: SqlSession) => Promise<T>) => loaded()[2].withNeonSession(url, fn);
  return {
    name: driver,
    async ready() {
      neon ??= await Promise.all([
        import('./drivers/neon-config.js'),
        import('./drivers/neon-http.js'),
        import('./drivers/neon-ws.js'),
      ]);
      neon[0].configureNeon({ localProxy: database.neonLocalProxy, webSocket: environment.webSocket });
    },
    createPool(role) {
      const [, { createNeonHttpPool }, { createNeonWsPool }] = loaded();
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
    close: async () => {},
  };
}
