import { Hono } from 'hono';
import type { ProbeResult } from './db/probe.js';
import type { ReadinessGate } from './gate.js';

export interface HealthOptions {
  gate: ReadinessGate;
  probe: { check(): Promise<ProbeResult>; readonly last: ProbeResult | undefined };
}

/** Liveness: answered without touching anything (no database, no log context, no span). */
export const LIVENESS_PATHS: ReadonlySet<string> = new Set(['/livez', '/health', '/healthz']);

const LIVE = JSON.stringify({ status: 'ok' });
const noStore = { 'cache-control': 'no-store' };

export function healthRoutes({ gate, probe }: HealthOptions): Hono {
  const routes = new Hono();

  // Liveness touches nothing: a database outage must never make the orchestrator kill the process.
  const live = () => new Response(LIVE, { headers: { 'content-type': 'application/json', ...noStore } });
  for (const path of LIVENESS_PATHS) routes.get(path, live);

  // Readiness is the gate AND a fresh write probe; a read-only database is not ready.
  routes.get('/readyz', async (c) => {
    const boot = gate.state;
    // A draining or failed server is unavailable whatever the database says: answer at once with
    // the last known database status instead of waiting on a probe.
    const settled = boot === 'draining' || boot === 'failed';
    const database = settled && probe.last ? probe.last : await probe.check();
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

  return routes;
}
