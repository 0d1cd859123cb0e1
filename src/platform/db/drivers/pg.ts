import type { Logger } from '../../log.js';
import type { DatabaseDriver, DatabasePool, PoolRole } from '../types.js';
import { type PgCompatiblePool, wrapPgCompatiblePool } from './pg-compatible.js';

export interface PgDriverOptions {
  url: string;
  poolMax: number;
  maxLifetimeSeconds: number;
  /** Bounds connecting and each probe query; a black-holed server must not hold the probe forever. */
  probeTimeoutMs: number;
  log: Logger;
}

const PROBE_POOL_MAX = 2;

type Modules = {
  Pool: typeof import('pg').default.Pool;
  drizzle: typeof import('drizzle-orm/node-postgres').drizzle;
};

export function createPgDriver(options: PgDriverOptions): DatabaseDriver {
  let modules: Modules | undefined;
  return {
    name: 'pg',
    async ready() {
      const [pg, orm] = await Promise.all([import('pg'), import('drizzle-orm/node-postgres')]);
      modules ??= { Pool: pg.default.Pool, drizzle: orm.drizzle };
    },
    createPool(role) {
      if (!modules) throw new Error('the pg driver is not ready');
      return createPool(modules, options, role);
    },
    close: async () => {},
  };
}

function createPool({ Pool, drizzle }: Modules, options: PgDriverOptions, role: PoolRole): DatabasePool {
  const probe = role === 'probe';
  const pool = new Pool({
    connectionString: options.url,
    max: probe ? PROBE_POOL_MAX : options.poolMax,
    maxLifetimeSeconds: options.maxLifetimeSeconds,
    connectionTimeoutMillis: probe ? options.probeTimeoutMs : Math.max(options.probeTimeoutMs, 10_000),
    idleTimeoutMillis: 30_000,
    application_name: `honest-health:${role}`,
    ...(probe ? { query_timeout: options.probeTimeoutMs } : {}),
  });
  return wrapPgCompatiblePool(
    pool as unknown as PgCompatiblePool,
    drizzle({ client: pool }),
    role,
    options.log,
  );
}
