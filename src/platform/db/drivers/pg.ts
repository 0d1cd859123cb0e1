import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
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

export function createPgDriver(options: PgDriverOptions): DatabaseDriver {
  return {
    name: 'pg',
    createPool: (role) => createPool(options, role),
    ready: async () => {},
    close: async () => {},
  };
}

function createPool(options: PgDriverOptions, role: PoolRole): DatabasePool {
  const probe = role === 'probe';
  const pool = new pg.Pool({
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
