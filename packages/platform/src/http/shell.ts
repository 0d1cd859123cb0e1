import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { Router } from 'hono/router';
import type { H, RouterRoute } from 'hono/types';
import type { DatabaseHandle } from '../db/handle.js';
import { isPoolExhausted, poisonReason } from '../db/poison.js';
import { DatabaseUnavailableError, withPoisonRetry } from '../db/poison-retry.js';
import type { WriteProbe } from '../db/probe.js';
import { errorCode } from '../util/error-chain.js';
import type { ErrorTracker } from '../util/error-tracking.js';
import type { Logger } from '../util/log.js';
import type { Telemetry } from '../util/telemetry.js';
import { errorBody } from './error-body.js';
import type { ReadinessGate } from './gate.js';
import { healthRoutes } from './health.js';
import { Hono } from './hono.js';
import { metricsRoutes } from './metrics-route.js';
import type { AppEnv, AppInstance, RequestScope } from './module.js';
import { currentRequestId, observeRequests } from './request-telemetry.js';
import { type TickHealthEndpoint, tickHealthRoutes } from './tick-health-route.js';

/** What the lifecycle hands each request (as Hono's `env`): the app's scope and the platform's parts. */
export interface ServedScope {
  database: DatabaseHandle;
  /** The probe's own handle (tick health and scrapes read through it). */
  probeDatabase: DatabaseHandle;
  writeProbe: WriteProbe;
  /**
   * For reads whose staleness is harmless (a query cache may answer them): a handle of its own where
   * the runtime has one (a cached Hyperdrive binding beside an uncached one), else `database`.
   */
  cachedDatabase?(): Promise<DatabaseHandle>;
  schedule(tick: string): void;
  waitUntil(work: Promise<unknown>): void;
  /** The socket's peer, where the runtime has one. */
  clientAddress?: string | undefined;
}

export type ShellEnv = { Bindings: ServedScope; Variables: RequestScope };

export interface ShellOptions<E extends AppEnv> {
  app: AppInstance<E>;
  gate: ReadinessGate;
  log: Logger;
  errors: ErrorTracker;
  telemetry: Telemetry;
  metrics: { token: string | undefined; render(scope: ServedScope): Promise<string> };
  tickHealth: Omit<TickHealthEndpoint, 'pool'>;
  /**
   * 'elsewhere' when METRICS_PORT runs the internal listener (createInternalShell), or a Worker has
   * no METRICS_TOKEN: this shell then answers /metrics and /healthz/ticks with 404, like any route it
   * does not have.
   */
  internalEndpoints?: 'here' | 'elsewhere';
  /** CLIENT_IP_HEADER: the trusted proxy's header that names the client. */
  clientIpHeader?: string | undefined;
  /**
   * The router that matches every request (routes mounted with route() join the shell's): TrieRouter
   * by default, the smallest bundle; Node and Bun pass hono's default pair (fastRouter), which
   * matches a static path such as POST /api/items by one map lookup.
   */
  router?: Router<[H, RouterRoute]>;
}

export type InternalShellOptions = Pick<
  ShellOptions<AppEnv>,
  'gate' | 'log' | 'errors' | 'telemetry' | 'metrics' | 'tickHealth'
>;

/**
 * The platform's HTTP surface around the app's routes, built once per process or isolate: request
 * ids, spans and counts; liveness, readiness, /metrics and /healthz/ticks; the request's database in
 * the context; and the answers to errors the app leaves alone (a database outage 503, a bug 500).
 * Call its fetch with the request's ServedScope as the env.
 */
export function createShell<E extends AppEnv>(options: ShellOptions<E>): Hono<ShellEnv> {
  const { app, gate, log, errors } = options;
  const shell = new Hono<ShellEnv>(options.router ? { router: options.router } : {});
  shell.use('*', observeRequests(options.telemetry));
  const scope = (c: Context): ServedScope => c.env;
  shell.route('/', healthRoutes({ gate, writeProbe: (c) => scope(c).writeProbe }));
  if (options.internalEndpoints !== 'elsewhere') mountInternalEndpoints(shell, options);
  const requestWork = { retry: true, source: 'request', log } as const;
  shell.use('*', async (c, next) => {
    const { database, schedule, waitUntil } = c.env;
    c.set('database', database);
    c.set('schedule', schedule);
    c.set('waitUntil', (work) =>
      waitUntil(work.catch((err: unknown) => log.warn('background work of a request failed', { err }))),
    );
    c.set('withDatabase', (fn) => withPoisonRetry(database, fn, requestWork));
    const header = options.clientIpHeader;
    c.set('clientIp', (header === undefined ? undefined : c.req.header(header)) ?? c.env.clientAddress);
    await next();
  });
  shell.route('/', app.routes);

  shell.notFound((c) => c.json(errorBody('not_found', 'no such route'), 404));
  shell.onError((err, c) => {
    const answered = app.onError?.(err, c);
    if (answered) return answered;
    if (err instanceof HTTPException) return c.json(errorBody('bad_request', err.message), err.status);
    return (
      databaseUnavailable(err, c, log) ?? statementTimedOut(err, c, log) ?? internalError(err, c, log, errors)
    );
  });
  return shell;
}

// SQLSTATE 57014: STATEMENT_TIMEOUT_MS cancelled the statement. The database is busy or the request
// asked too much of it; the pool is fine, so nothing is disposed.
function statementTimedOut(err: Error, c: Context<ShellEnv>, log: Logger): Response | undefined {
  if (errorCode(err) !== '57014') return undefined;
  log.warn('request failed: statement timeout', { method: c.req.method, path: c.req.path });
  return c.json(
    errorBody(
      'database_timeout',
      'the database did not answer within this server’s statement timeout (STATEMENT_TIMEOUT_MS); retry shortly',
    ),
    503,
    { 'retry-after': '1' },
  );
}

/**
 * The internal listener's surface (METRICS_PORT): liveness, readiness, /metrics and /healthz/ticks,
 * none of the app's routes. Called with the same ServedScope as the main shell.
 */
export function createInternalShell(options: InternalShellOptions): Hono<ShellEnv> {
  const { gate, log, errors } = options;
  const shell = new Hono<ShellEnv>();
  shell.use('*', observeRequests(options.telemetry));
  shell.route('/', healthRoutes({ gate, writeProbe: (c) => (c.env as ServedScope).writeProbe }));
  mountInternalEndpoints(shell, options);
  shell.notFound((c) => c.json(errorBody('not_found', 'no such route'), 404));
  shell.onError((err, c) => internalError(err, c, log, errors));
  return shell;
}

function mountInternalEndpoints(shell: Hono<ShellEnv>, options: InternalShellOptions): void {
  const scope = (c: Context): ServedScope => c.env;
  shell.route(
    '/',
    metricsRoutes({ token: options.metrics.token, render: (c) => options.metrics.render(scope(c)) }),
  );
  shell.route('/', tickHealthRoutes({ ...options.tickHealth, pool: (c) => scope(c).probeDatabase.pool }));
}

// A failover in progress: the pool is already rebuilt, the client should simply come back.
function databaseUnavailable(err: Error, c: Context<ShellEnv>, log: Logger): Response | undefined {
  const reason = err instanceof DatabaseUnavailableError ? err.reason : poisonReason(err);
  if (reason === undefined && !isPoolExhausted(err)) return undefined;
  if (reason !== undefined && !(err instanceof DatabaseUnavailableError)) {
    // Like every other poisoned call: the episode counts it and damps the disposal (episode.ts).
    const database = c.env.database;
    database.episodes.sign('poison', reason, 'request');
    void database.dispose({ source: 'request', reason });
  }
  // Info: the failover episode is the warning, once (platform/db/episode.ts); this is one of many.
  log.info('request failed: database unavailable', {
    method: c.req.method,
    path: c.req.path,
    reason: reason ?? 'pool exhausted',
  });
  return c.json(errorBody('database_unavailable', 'the database is unavailable; retry shortly'), 503, {
    'retry-after': '1',
  });
}

// Anything else is a bug: logged and reported in full, answered without details.
function internalError(err: Error, c: Context<ShellEnv>, log: Logger, errors: ErrorTracker): Response {
  log.error('unhandled request error', { method: c.req.method, path: c.req.path, err });
  const requestId = currentRequestId();
  errors.capture(err, { path: c.req.path, ...(requestId ? { request_id: requestId } : {}) });
  return c.json(errorBody('internal', 'internal error'), 500);
}
