import type { Logger } from '../../util/log.js';
import { StatementNaming } from '../statements.js';
import type { DatabaseDriver } from '../types.js';
import { nodePgDriver } from './node-pg-driver.js';

/** Options of `createHyperdriveDriver`. */
export interface HyperdriveDriverOptions {
  /** `env.HYPERDRIVE.connectionString`: read per invocation, never logged (it holds a password). */
  connectionString: string;
  poolMax: number;
  probeTimeoutMs: number;
  log: Logger;
}

// A Worker invocation may hold 6 connections open at once ("Simultaneous open connections",
// developers.cloudflare.com/workers/platform/limits/); Cloudflare's Hyperdrive examples cap a
// request's driver at 5. The app pool and the probe pool share that: 4 + 1.
const APP_POOL_MAX = 4;
const PROBE_POOL_MAX = 1;

/**
 * node-postgres through a Hyperdrive binding. Made per request or cron invocation, as the Neon
 * WebSocket driver is: a socket belongs to the request that opened it ("Cannot perform I/O on behalf
 * of a different request"), and Cloudflare's own example creates its `pg` client inside `fetch`
 * (developers.cloudflare.com/hyperdrive/examples/connect-to-postgres/postgres-drivers-and-libraries/node-postgres/).
 * Hyperdrive keeps the pool of origin connections, so a connection here costs no Postgres handshake.
 *
 * Hyperdrive pools in transaction mode; Cloudflare lists pg's protocol-level named statements as
 * supported there and SQL PREPARE as not ("Supported databases and features"), so names stay on, with
 * the run-time fallback every pg pool has (statements.ts).
 * No application_name: the binding's startup parameters are Cloudflare's, and nothing here needs it.
 */
export function createHyperdriveDriver(options: HyperdriveDriverOptions): DatabaseDriver {
  const lost = () => options.log.warn('named prepared statements lost behind Hyperdrive: using unnamed ones');
  return nodePgDriver(
    'hyperdrive',
    new StatementNaming(true, lost),
    options.log,
    options.probeTimeoutMs,
    (probe) => ({
      connectionString: options.connectionString,
      max: probe ? PROBE_POOL_MAX : Math.min(options.poolMax, APP_POOL_MAX),
    }),
  );
}
