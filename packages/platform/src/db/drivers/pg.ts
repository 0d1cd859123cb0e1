import type { DatabasePooler } from '../../util/config.js';
import { DEFAULT_NAME } from '../../util/identity.js';
import type { Logger } from '../../util/log.js';
import { StatementNaming } from '../statements.js';
import type { DatabaseDriver, DatabasePool, PoolerInfo, PoolRole } from '../types.js';
import { type PgCompatiblePool, wrapPgCompatiblePool } from './pg-compatible.js';
import { detectTransactionPooler } from './pooler-check.js';

export interface PgDriverOptions {
  url: string;
  poolMax: number;
  maxLifetimeSeconds: number;
  /** Bounds connecting and each probe query; a black-holed server must not hold the probe forever. */
  probeTimeoutMs: number;
  /** `auto`: inspectPooler() detects a transaction-mode pooler; otherwise as configured. */
  pooler?: DatabasePooler;
  /** Postgres' `application_name` is `<applicationName>:<pool>`: the app's name by default `app`. */
  applicationName?: string;
  log: Logger;
}

const PROBE_POOL_MAX = 2;

type Modules = {
  Pool: typeof import('pg').default.Pool;
  Client: typeof import('pg').default.Client;
  drizzle: typeof import('drizzle-orm/node-postgres').drizzle;
};

export function createPgDriver(options: PgDriverOptions): DatabaseDriver {
  let modules: Modules | undefined;
  const configured = options.pooler ?? 'auto';
  // Shared by every pool of this driver, so a pool rebuilt after a failover inherits what boot found.
  const statements = new StatementNaming(configured !== 'transaction', () =>
    options.log.warn('named prepared statements lost: a transaction pooler? using unnamed ones from now on'),
  );
  return {
    name: 'pg',
    async ready() {
      const [pg, orm] = await Promise.all([import('pg'), import('drizzle-orm/node-postgres')]);
      modules ??= { Pool: pg.default.Pool, Client: pg.default.Client, drizzle: orm.drizzle };
    },
    async inspectPooler(): Promise<PoolerInfo> {
      if (configured !== 'auto') return { mode: configured, source: 'configured' };
      if (!modules) throw new Error('the pg driver is not ready');
      const { Client } = modules;
      let transaction: boolean;
      try {
        transaction = await detectTransactionPooler(
          () =>
            new Client({
              connectionString: options.url,
              connectionTimeoutMillis: options.probeTimeoutMs,
              query_timeout: options.probeTimeoutMs,
              application_name: `${options.applicationName ?? DEFAULT_NAME}:pooler-check`,
            }),
        );
        if (transaction) statements.named = false;
      } catch (err) {
        // The database answered the ping, so this is no reason to refuse boot: unnamed statements
        // work behind every pooler and direct, named ones only where sessions last. Assume the worst.
        options.log.warn('could not check for a transaction pooler; assuming one', { err });
        statements.named = false;
        return { mode: 'transaction', source: 'assumed' };
      }
      return { mode: transaction ? 'transaction' : 'session', source: 'detected' };
    },
    createPool(role) {
      if (!modules) throw new Error('the pg driver is not ready');
      const pool = createPool(modules, options, role);
      statements.register(pool.db);
      return pool;
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
    application_name: `${options.applicationName ?? DEFAULT_NAME}:${role}`,
    ...(probe ? { query_timeout: options.probeTimeoutMs } : {}),
  });
  return wrapPgCompatiblePool(
    pool as unknown as PgCompatiblePool,
    drizzle({ client: pool }),
    role,
    options.log,
  );
}
