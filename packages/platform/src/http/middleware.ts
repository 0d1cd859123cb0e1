import type { Context, MiddlewareHandler } from 'hono';
import { DatabaseHandle } from '../db/handle.js';
import { isPoolExhausted, poisonReason } from '../db/poison.js';
import { DatabaseUnavailableError, withPoisonRetry } from '../db/poison-retry.js';
import { type ProbeResult, WriteProbe } from '../db/probe.js';
import type { Database, DatabaseDriver } from '../db/types.js';
import { createLogger, type Logger } from '../util/log.js';
import { errorBody } from './error-body.js';

// The platform's readiness and its dispose-and-retry for an app that keeps its own entry and
// lifecycle, as it would mount lightship's or terminus's checks: the same WriteProbe and
// withPoisonRetry the shell runs, with nothing of the boot, the gate or the scheduler around them.

/** Options of {@link createDatabaseHealth}. */
export interface DatabaseHealthOptions {
  /** Builds the pools: `createPgDriver` (`/drivers/pg`), `createNeonDriver`, `createPgliteDriver`. */
  driver: DatabaseDriver;
  /** This instance's row in `health_heartbeat`, the table the probe writes (a host or machine name). */
  instanceId: string;
  /** How long one probe may take before readiness answers `timeout`; 2000 ms by default. */
  timeoutMs?: number;
  /** Where disposals and poisoned calls are logged; JSON lines on stdout at `info` by default. */
  log?: Logger;
}

/** What {@link withDatabase} callers choose per call. */
export interface WithDatabaseOptions {
  /** Run once more on a fresh pool after a poisoned pool: only for reads and idempotent writes (default true). */
  retry?: boolean;
}

/**
 * The app's database behind a handle that can be thrown away, and a write probe on a small pool of
 * its own. Build one per process; end it with `close()` on shutdown.
 *
 * @example
 * ```ts
 * const health = await createDatabaseHealth({ driver, instanceId: hostname() });
 * const rows = await health.withDatabase((db) => db.execute(sql`SELECT 1 AS one`));
 * ```
 */
export interface DatabaseHealth {
  /** The app's pool: `database.db` is a Drizzle database, rebuilt after a disposal. */
  readonly database: DatabaseHandle;
  /**
   * Proves the database takes a write (one upsert in `health_heartbeat`), bounded by `timeoutMs`;
   * concurrent callers share the probe in flight. A read-only answer disposes both pools.
   */
  probe(): Promise<ProbeResult>;
  /**
   * Runs `fn` on the app's pool. A poisoned pool (a read-only node, a cut connection) is disposed and
   * `fn` runs once more on a fresh one; a second poisoned failure throws `DatabaseUnavailableError`.
   */
  withDatabase<T>(fn: (db: Database) => Promise<T>, options?: WithDatabaseOptions): Promise<T>;
  /** Ends both pools and the driver. */
  close(): Promise<void>;
}

/**
 * Builds a {@link DatabaseHealth}: the app's handle and the write probe's, over one driver, once the
 * driver is ready (drivers load their modules, and PGlite starts, in `ready()`).
 */
export async function createDatabaseHealth(options: DatabaseHealthOptions): Promise<DatabaseHealth> {
  await options.driver.ready();
  const log = options.log ?? createLogger('info');
  const database = new DatabaseHandle(options.driver, 'app', log);
  // The probe's own pool shares the failover episode, so one failover is one episode in the logs.
  const probeDatabase = new DatabaseHandle(options.driver, 'probe', log, undefined, database.episodes);
  const writeProbe = new WriteProbe({
    appDatabase: database,
    probeDatabase,
    timeoutMs: options.timeoutMs ?? 2_000,
    instanceId: options.instanceId,
    log,
  });
  return {
    database,
    probe: () => writeProbe.check(),
    withDatabase: (fn, { retry = true } = {}) =>
      withPoisonRetry(database, fn, { source: 'request', retry, log }),
    async close() {
      await Promise.allSettled([database.close(), probeDatabase.close()]);
      await options.driver.close();
    },
  };
}

const noStore = { 'cache-control': 'no-store' };

/** Options of {@link readinessHandler}. */
export interface ReadinessOptions {
  /**
   * True once the app has begun to shut down: readiness answers `503` at once, `"server":"draining"`,
   * so load balancers take the instance out while it finishes what it serves.
   */
  draining?: () => boolean;
}

/**
 * A readiness route (`GET /readyz`): `200 {"status":"ok","checks":{"database":"ok"}}` when a write
 * probe succeeds, else `503` with `read_only`, `unreachable` or `timeout`; `?verbose` adds the latency
 * and a secret-free reason.
 *
 * @example
 * ```ts
 * let stopping = false;
 * app.get('/readyz', readinessHandler(health, { draining: () => stopping }));
 * ```
 */
export function readinessHandler(
  health: Pick<DatabaseHealth, 'probe'>,
  options: ReadinessOptions = {},
): (c: Context) => Promise<Response> {
  return async (c) => {
    if (options.draining?.() === true) {
      return c.json({ status: 'unavailable', checks: { server: 'draining' } }, 503, noStore);
    }
    const result = await health.probe();
    const ready = result.status === 'ok';
    const body: Record<string, unknown> = {
      status: ready ? 'ok' : 'unavailable',
      checks: { database: result.status },
    };
    if (c.req.query('verbose') !== undefined) {
      body.details = {
        database: { latency_ms: result.latencyMs, ...(result.reason ? { reason: result.reason } : {}) },
      };
    }
    return c.json(body, ready ? 200 : 503, noStore);
  };
}

/** What {@link databaseMiddleware} puts in the context: `c.var.withDatabase(fn)`. */
export type DatabaseVariables = {
  withDatabase<T>(fn: (db: Database) => Promise<T>, options?: WithDatabaseOptions): Promise<T>;
};

/**
 * Request-path dispose-and-retry-once as Hono middleware: it gives routes `c.var.withDatabase(fn)`,
 * and answers an error that says the database is failing over (or the pool is exhausted) with
 * `503 database_unavailable` and `Retry-After: 1` instead of a 500.
 *
 * @example
 * ```ts
 * const app = new Hono<{ Variables: DatabaseVariables }>();
 * app.use('/api/*', databaseMiddleware(health));
 * app.get('/api/one', async (c) => c.json(await c.var.withDatabase((db) => db.execute(sql`SELECT 1`))));
 * ```
 */
export function databaseMiddleware(
  health: Pick<DatabaseHealth, 'withDatabase'>,
): MiddlewareHandler<{ Variables: DatabaseVariables }> {
  return async (c, next) => {
    c.set('withDatabase', (fn, options) => health.withDatabase(fn, options));
    await next();
    // Hono hands a thrown error to the app's error handler and records it here.
    const answer = c.error === undefined ? undefined : databaseUnavailableResponse(c.error);
    if (answer !== undefined) c.res = answer;
  };
}

/**
 * `503 database_unavailable` with `Retry-After: 1` for an error that says the database is failing over
 * (`DatabaseUnavailableError`, a poisoned pool) or the pool is exhausted; `undefined` for any other
 * error, which is the app's to answer. For an app's own `onError`.
 */
export function databaseUnavailableResponse(err: unknown): Response | undefined {
  const unavailable =
    err instanceof DatabaseUnavailableError || poisonReason(err) !== undefined || isPoolExhausted(err);
  if (!unavailable) return undefined;
  return Response.json(errorBody('database_unavailable', 'the database is unavailable; retry shortly'), {
    status: 503,
    headers: { 'retry-after': '1', ...noStore },
  });
}
