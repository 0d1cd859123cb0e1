import { Hono } from 'hono';
import type { ErrorTracker } from '../platform/error-tracking.js';
import type { ReadinessGate } from '../platform/gate.js';
import { type HealthOptions, healthRoutes } from '../platform/health.js';
import type { Logger } from '../platform/log.js';

export interface AppDeps {
  gate: ReadinessGate;
  probe: HealthOptions['probe'];
  log: Logger;
  errors: ErrorTracker;
}

export function createApp({ gate, probe, log, errors }: AppDeps): Hono {
  const app = new Hono();
  app.route('/', healthRoutes({ gate, probe }));

  app.notFound((c) => c.json({ error: { code: 'not_found', message: 'no such route' } }, 404));
  // An unexpected error is logged and reported with its details; the client gets none of them.
  app.onError((err, c) => {
    log.error('unhandled request error', { method: c.req.method, path: c.req.path, err });
    errors.capture(err, { path: c.req.path });
    return c.json({ error: { code: 'internal', message: 'internal error' } }, 500);
  });
  return app;
}
