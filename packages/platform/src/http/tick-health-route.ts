import type { Context } from 'hono';
import type { DatabasePool } from '../db/types.js';
import { evaluateTickHealth, type MonitoredTick, type TickHealthPolicy } from '../jobs/tick-health.js';
import { readTickHealth, tickErrorCode } from '../jobs/tick-health-store.js';
import type { Logger } from '../util/log.js';
import { withTimeout } from '../util/timeout.js';
import { Hono } from './hono.js';
import { hasMetricsToken, unauthorized } from './metrics-route.js';

export const TICK_HEALTH_PATH = '/healthz/ticks';

export interface TickHealthEndpoint {
  /** The pool to read from: the probe's on Node and Bun, so a busy application pool cannot stall it. */
  pool(c: Context): DatabasePool;
  /** The ticks enabled here, with their intervals. */
  ticks: readonly MonitoredTick[];
  policy: TickHealthPolicy;
  /** METRICS_TOKEN: the endpoint is protected like /metrics. */
  token: string | undefined;
  timeoutMs: number;
  log: Logger;
}

/**
 * GET /healthz/ticks: whether the scheduled work is getting done, for monitoring and paging. Never
 * a routing or restart signal (that is /readyz, and /healthz is liveness): a failing tick is not a
 * reason to take a replica out of rotation, let alone to restart it. 200 when every enabled tick
 * succeeded within K intervals and is not failing run after run on any instance; 503 otherwise, and
 * when the table cannot be read.
 */
export function tickHealthRoutes(endpoint: TickHealthEndpoint): Hono {
  const routes = new Hono();
  routes.get(TICK_HEALTH_PATH, async (c) => {
    if (!hasMetricsToken(c.req.header('authorization'), endpoint.token)) return unauthorized();
    const headers = { 'cache-control': 'no-store' };
    try {
      const snapshot = await withTimeout(
        readTickHealth(endpoint.pool(c)),
        endpoint.timeoutMs,
        'reading tick health',
      );
      const report = evaluateTickHealth(snapshot, endpoint.ticks, endpoint.policy);
      return c.json(report, report.status === 'ok' ? 200 : 503, headers);
    } catch (err) {
      const reason = tickErrorCode(err);
      endpoint.log.warn('tick health unreadable', { reason });
      return c.json(
        { status: 'unknown', reason: `tick health unreadable (${reason})`, ticks: {} },
        503,
        headers,
      );
    }
  });
  return routes;
}
