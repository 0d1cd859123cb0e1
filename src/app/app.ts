import { Hono } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { DatabaseHandle } from '../platform/db/handle.js';
import { isPoolExhausted, poisonReason } from '../platform/db/poison.js';
import { DatabaseUnavailableError } from '../platform/db/poison-retry.js';
import { errorCode } from '../platform/error-chain.js';
import type { ErrorTracker } from '../platform/error-tracking.js';
import type { ReadinessGate } from '../platform/gate.js';
import { type HealthOptions, healthRoutes } from '../platform/health.js';
import { type TickHealthEndpoint, tickHealthRoutes } from '../platform/jobs/tick-health-route.js';
import type { Logger } from '../platform/log.js';
import { type MetricsEndpoint, metricsRoutes } from '../platform/metrics/route.js';
import type { SecretBox } from '../platform/secret-box.js';
import { currentRequestId, observeRequests } from '../platform/telemetry/requests.js';
import type { Telemetry } from '../platform/telemetry/telemetry.js';
import { requireApiKey } from './auth.js';
import type { XeroConfig } from './config.js';
import { connectRoutes } from './connections/connect-routes.js';
import { connectionRoutes } from './connections/routes.js';
import { ApiError, errorBody, refusedInput } from './errors.js';
import { invoiceRoutes } from './invoices/routes.js';
import type { Registry } from './registry.js';
import type { XeroClient } from './xero/client.js';

export interface AppDeps {
  gate: ReadinessGate;
  probe: HealthOptions['probe'];
  database: DatabaseHandle;
  registry: Registry;
  log: Logger;
  errors: ErrorTracker;
  xero: XeroClient;
  xeroConfig: XeroConfig;
  box: SecretBox;
  /** An invoice was queued for a connected organization: its first push can start now. */
  onQueued: () => void;
  onConnected: () => void;
  /** Request ids, spans and HTTP metrics for every request. */
  telemetry: Telemetry;
  /** GET /metrics. */
  metrics: MetricsEndpoint;
  /** GET /healthz/ticks. */
  tickHealth: TickHealthEndpoint;
}

export function createApp(deps: AppDeps): Hono {
  const { gate, probe, database, registry, log, errors, xero, box } = deps;
  const app = new Hono();
  app.use('*', observeRequests(deps.telemetry));
  app.route('/', healthRoutes({ gate, probe }));
  app.route('/', metricsRoutes(deps.metrics));
  app.route('/', tickHealthRoutes(deps.tickHealth));
  app.route(
    '/connect',
    connectRoutes({
      database,
      registry,
      xero,
      config: deps.xeroConfig,
      box,
      log,
      onConnected: deps.onConnected,
    }),
  );

  const api = new Hono();
  api.use('*', requireApiKey(registry));
  api.route('/invoices', invoiceRoutes({ database, log, onQueued: deps.onQueued }));
  api.route('/connections', connectionRoutes({ database, xero, box, log }));
  app.route('/api', api);

  app.notFound((c) => c.json(errorBody('not_found', 'no such route'), 404));
  app.onError((err, c) => {
    if (err instanceof ApiError) return c.json(errorBody(err.code, err.message, err.fields), err.status);
    if (err instanceof HTTPException) return c.json(errorBody('bad_request', err.message), err.status);
    const refused = refusedInput(err);
    if (refused) {
      // Worth a look (validation let it through), but the client's fault: warn, not error.
      log.warn('request refused by the database: invalid input', {
        method: c.req.method,
        path: c.req.path,
        sqlstate: errorCode(err),
      });
      return c.json(errorBody(refused.code, refused.message), 422);
    }
    // A failover in progress: the pool is already rebuilt, the client should simply come back.
    const reason = err instanceof DatabaseUnavailableError ? err.reason : poisonReason(err);
    if (reason !== undefined || isPoolExhausted(err)) {
      if (reason !== undefined && !(err instanceof DatabaseUnavailableError)) {
        // Like every other poisoned call: the episode counts it and damps the disposal (episode.ts).
        database.episodes.sign('poison', reason, 'request');
        void database.dispose(`poison in request: ${reason}`);
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
    log.error('unhandled request error', { method: c.req.method, path: c.req.path, err });
    const requestId = currentRequestId();
    errors.capture(err, { path: c.req.path, ...(requestId ? { request_id: requestId } : {}) });
    return c.json(errorBody('internal', 'internal error'), 500);
  });
  return app;
}
