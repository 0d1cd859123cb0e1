import type { Config, NetworkDriver } from '../../util/config.js';
import type { Logger } from '../../util/log.js';
import { StatementNaming } from '../statements.js';
import type { DatabaseDriver, SqlSession } from '../types.js';

/**
 * The Neon drivers: the app pool over WebSockets (neon-ws) or HTTP (neon-http), the probe always
 * over HTTP. Its modules load in ready(), and it imports nothing else, so a Worker bundle that uses
 * it carries neither node-postgres nor PGlite.
 */
export function createNeonDriver(
  config: Config,
  database: { driver: NetworkDriver; url: string; neonLocalProxy?: string },
  log: Logger,
): DatabaseDriver {
  const { url, driver } = database;
  type NeonModules = [
    typeof import('./neon-config.js'),
    typeof import('./neon-http.js'),
    typeof import('./neon-ws.js'),
  ];
  let neon: NeonModules | undefined;
  const loaded = (): NeonModules => {
    if (!neon) throw new Error(`the ${driver} driver is not ready`);
    return neon;
  };
  const session = <T>(fn: (session: SqlSession) => Promise<T>) => loaded()[2].withNeonSession(url, fn);
  // Neon's pooled endpoint (a `-pooler` host) is PgBouncer in transaction mode: no named statements there.
  const statements = new StatementNaming(
    config.databasePooler === 'session' ||
      (config.databasePooler === 'auto' && !new URL(url).hostname.includes('-pooler')),
  );
  return {
    name: driver,
    async ready() {
      neon ??= await Promise.all([
        import('./neon-config.js'),
        import('./neon-http.js'),
        import('./neon-ws.js'),
      ]);
      neon[0].configureNeon({ localProxy: database.neonLocalProxy });
    },
    createPool(role) {
      const [, { createNeonHttpPool }, { createNeonWsPool }] = loaded();
      // On Neon the probe always goes over HTTP: it has no connection that a failover could pin.
      if (role === 'probe')
        return createNeonHttpPool({ url, timeoutMs: config.probeTimeoutMs, withSession: session });
      if (driver === 'neon-http') return createNeonHttpPool({ url, withSession: session });
      const pool = createNeonWsPool(
        {
          url,
          max: config.poolMax,
          maxLifetimeSeconds: config.poolMaxLifetimeSeconds,
          connectionTimeoutMs: Math.max(config.probeTimeoutMs, 10_000),
          log,
          timeout: { statementTimeoutMs: config.statementTimeoutMs, sessionsLast: () => statements.named },
        },
        role,
      );
      statements.register(pool.db);
      return pool;
    },
    close: async () => {},
  };
}
