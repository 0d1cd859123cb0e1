import type { Context } from 'hono';
import type { ProbeResult } from '../db/probe.js';
import { errorBody } from './error-body.js';
import type { ReadinessGate } from './gate.js';
import { Hono } from './hono.js';

/** The write probe as readiness uses it: a fresh check, or the last one. */
export interface ReadinessCheck {
  check(): Promise<ProbeResult>;
  readonly last: ProbeResult | undefined;
}

export interface HealthOptions {
  gate: ReadinessGate;
  /** This request's probe (one per process; on Workers, one per request: its I/O belongs to it). */
  writeProbe(c: Context): ReadinessCheck;
}

/** Liveness: answered without touching anything (no database, no log context, no span). */
export const LIVENESS_PATHS: ReadonlySet<string> = new Set(['/livez', '/health', '/healthz']);

const LIVE = JSON.stringify({ status: 'ok' });
const noStore = { 'cache-control': 'no-store' };

/** The liveness answer, the same from every runtime's fast path and from the routes. */
export const liveResponse = (method: string): Response =>
  new Response(method === 'HEAD' ? null : LIVE, {
    headers: { 'content-type': 'application/json', ...noStore },
  });

/**
 * The methods a probe route answers. Hono answers HEAD from the GET route (without the body). OPTIONS
 * is what HAProxy sends by default: "When not set, the "OPTIONS" method is used" (configuration.txt,
 * `option httpchk`, HAProxy 2.6 in Debian 12), so a probe answers it as it answers GET: liveness 200,
 * readiness 200 or 503. A 204 with Allow would be the textbook answer, and a lie for readiness.
 */
export const PROBE_METHODS = 'GET, HEAD, OPTIONS';

/**
 * 405 with `Allow` (RFC 9110 section 15.5.6) for a method a probe or scrape route does not take, in the
 * API's error shape: a checker configured with POST learns what is wrong instead of seeing a 404.
 */
export function methodNotAllowed(allow: string = PROBE_METHODS): Response {
  return Response.json(errorBody('method_not_allowed', `use ${allow.replace(/, ([^,]*)$/, ' or $1')}`), {
    status: 405,
    headers: { allow, ...noStore },
  });
}

export const isProbeMethod = (method: string) =>
  method === 'GET' || method === 'HEAD' || method === 'OPTIONS';

export function healthRoutes({ gate, writeProbe }: HealthOptions): Hono {
  const routes = new Hono();

  // Liveness touches nothing: a database outage must never make the orchestrator kill the process.
  for (const path of LIVENESS_PATHS) routes.on(['GET', 'OPTIONS'], path, (c) => liveResponse(c.req.method));

  // Readiness is the gate AND a fresh write probe; a read-only database is not ready.
  routes.on(['GET', 'OPTIONS'], '/readyz', async (c) => {
    const boot = gate.state;
    // A draining or failed server is unavailable whatever the database says: answer at once with
    // the last known database status instead of waiting on a probe.
    const settled = boot === 'draining' || boot === 'failed';
    const requestProbe = writeProbe(c);
    const database = settled && requestProbe.last ? requestProbe.last : await requestProbe.check();
    const ready = boot === 'ok' && database.status === 'ok';
    const body: Record<string, unknown> = {
      status: ready ? 'ok' : 'unavailable',
      checks: { boot, database: database.status },
    };
    if (c.req.query('verbose') !== undefined) {
      body.details = {
        boot: { state: boot },
        database: {
          latency_ms: database.latencyMs,
          ...(database.reason ? { reason: database.reason } : {}),
          // Read in the probe's own round trip: whether a 202 survives a failover (docs/durability.md).
          ...(database.replication ? { replication: database.replication } : {}),
        },
      };
    }
    return c.json(body, ready ? 200 : 503, noStore);
  });

  // Registered after the probe routes, so these only see the other methods.
  for (const path of [...LIVENESS_PATHS, '/readyz']) routes.all(path, () => methodNotAllowed());

  return routes;
}
