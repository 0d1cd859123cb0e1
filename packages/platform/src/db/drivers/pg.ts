import type { PoolConfig } from 'pg';
import type { DatabasePooler } from '../../util/config.js';
import { DEFAULT_NAME } from '../../util/identity.js';
import type { Logger } from '../../util/log.js';
import { StatementNaming } from '../statements.js';
import type { DatabaseDriver, PoolerInfo, PoolRole } from '../types.js';
import { nodePgDriver } from './node-pg-driver.js';
import { detectTransactionPooler } from './pooler-check.js';

/** Options of `createPgDriver`. */
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
  /** STATEMENT_TIMEOUT_MS on the application pool; 0: none. */
  statementTimeoutMs?: number;
  log: Logger;
}

const PROBE_POOL_MAX = 2;

/**
 * The node-postgres driver: an app pool and a probe pool of at most 2, each with a max connection
 * lifetime.
 */
export function createPgDriver(options: PgDriverOptions): DatabaseDriver {
  const configured = options.pooler ?? 'auto';
  // Shared by every pool of this driver, so a pool rebuilt after a failover inherits what boot found.
  const statements = new StatementNaming(configured !== 'transaction', () =>
    options.log.warn('named prepared statements lost: a transaction pooler? using unnamed ones from now on'),
  );
  return {
    ...nodePgDriver(
      'pg',
      statements,
      options.log,
      options.probeTimeoutMs,
      (probe, role) => poolConfig(options, probe, role),
      options.statementTimeoutMs,
    ),
    async inspectPooler(): Promise<PoolerInfo> {
      if (configured !== 'auto') return { mode: configured, source: 'configured' };
      // ready() loaded pg: this import only hands its Client over.
      const { Client } = (await import('pg')).default;
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
  };
}

function poolConfig(options: PgDriverOptions, probe: boolean, role: PoolRole): PoolConfig {
  return {
    connectionString: options.url,
    max: probe ? PROBE_POOL_MAX : options.poolMax,
    maxLifetimeSeconds: options.maxLifetimeSeconds,
    idleTimeoutMillis: 30_000,
    application_name: `${options.applicationName ?? DEFAULT_NAME}:${role}`,
  };
}
