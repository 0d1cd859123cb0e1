import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import type { Logger } from '../../log.js';
import type { DatabaseDriver, DatabasePool, PoolRole } from '../types.js';

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
  // Without a listener an idle client's error (server restart, failover) crashes the process.
  pool.on('error', (err) => options.log.warn('idle database client failed', { pool: role, err }));

  return {
    db: drizzle({ client: pool }),
    query: (text, params) => pool.query(text, params),
    async withSession(fn) {
      const client = await pool.connect();
      try {
        const result = await fn(client);
        client.release();
        return result;
      } catch (err) {
        // Destroy rather than reuse: the session may hold a lock or sit in an aborted transaction.
        client.release(err instanceof Error ? err : true);
        throw err;
      }
    },
    stats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    end: () => pool.end(),
  };
}
