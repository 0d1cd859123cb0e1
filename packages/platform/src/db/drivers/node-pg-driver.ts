import type { PoolConfig } from 'pg';
import type { Logger } from '../../util/log.js';
import type { StatementNaming } from '../statements.js';
import type { DatabaseDriver, PoolRole } from '../types.js';
import { type PgCompatiblePool, wrapPgCompatiblePool } from './pg-compatible.js';

type Modules = {
  Pool: typeof import('pg').default.Pool;
  drizzle: typeof import('drizzle-orm/node-postgres').drizzle;
};

/**
 * A driver of node-postgres pools, as the `pg` and Hyperdrive drivers are: they differ only in each
 * pool's settings (and `pg` inspects the pooler). pg and its Drizzle dialect are imported in ready(),
 * so a driver that is offered but not chosen costs nothing; every pool is poison-aware, its
 * statements named by the driver's policy.
 */
export function nodePgDriver(
  name: string,
  statements: StatementNaming,
  log: Logger,
  /** Bounds connecting, and each query of the probe's pool: a black-holed server must not hold it. */
  probeTimeoutMs: number,
  /** Each pool's own settings (the URL, its size); `probe` is true for the write probe's pool. */
  settings: (probe: boolean, role: PoolRole) => PoolConfig,
  /** STATEMENT_TIMEOUT_MS for the application pool, where sessions last (statements.named). */
  statementTimeoutMs = 0,
): DatabaseDriver {
  let modules: Modules | undefined;
  return {
    name,
    async ready() {
      const [pg, orm] = await Promise.all([import('pg'), import('drizzle-orm/node-postgres')]);
      modules ??= { Pool: pg.default.Pool, drizzle: orm.drizzle };
    },
    createPool(role) {
      if (!modules) throw new Error(`the ${name} driver is not ready`);
      const probe = role === 'probe';
      const client = new modules.Pool({
        connectionTimeoutMillis: probe ? probeTimeoutMs : Math.max(probeTimeoutMs, 10_000),
        ...(probe ? { query_timeout: probeTimeoutMs } : {}),
        ...settings(probe, role),
      });
      const pool = wrapPgCompatiblePool(
        client as unknown as PgCompatiblePool,
        modules.drizzle({ client }),
        role,
        log,
        probe ? undefined : { statementTimeoutMs, sessionsLast: () => statements.named },
      );
      statements.register(pool.db);
      return pool;
    },
    close: async () => {},
  };
}
