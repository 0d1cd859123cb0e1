import type { DisposalCause } from '../db/disposal.js';
import type { PoolRole } from '../db/types.js';
import {
  type PlatformMetrics,
  PROBE_OUTCOMES,
  type ReportedDisposal,
  type ReportedPool,
} from '../util/telemetry.js';
import { countRetirements } from './pool-retirements.js';
import type { MetricsRegistry } from './registry.js';

// What the platform counts: HTTP requests, readiness probes, pool disposals, tick runs. Every name and
// label is listed in docs/observability.md (Metrics); keep the two in step.

// The `cause` label of a disposal, by who asked for it. `other` stays in the label set (it is in the
// documented series, starting at 0) although no typed cause maps to it.
const DISPOSAL_LABELS = {
  probe: 'probe_read_only',
  tick: 'tick_poison',
  request: 'request_poison',
  background: 'background_poison',
} as const satisfies Record<DisposalCause['source'], string>;
// The port (util/telemetry.ts) names db's pools and disposal sources again; these fail to compile
// when the two drift apart.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const poolsAgree: Same<PoolRole, ReportedPool> = true;
const sourcesAgree: Same<DisposalCause['source'], ReportedDisposal['source']> = true;
void poolsAgree;
void sourcesAgree;
const DISPOSAL_CAUSES = [...Object.values(DISPOSAL_LABELS), 'other'] as const;

// Latency buckets in seconds: a local write probe takes a millisecond, a tick up to a minute.
const FAST = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const SLOW = [0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

/** The platform's counters and histograms, named `<prefix>_...` (the app's identity). */
export function platformMetrics(registry: MetricsRegistry, prefix: string): PlatformMetrics {
  // `code`, not `status`: the label name of Prometheus' own HTTP instrumentation (client_golang's
  // promhttp supports the labels "code" and "method"; the server's prometheus_http_requests_total has
  // `code` and `handler`), so dashboards and alerts written for it work here; `status` here would
  // also read like <prefix>_database_status's label, which means something else.
  const requests = registry.counter({
    name: `${prefix}_http_requests_total`,
    help: 'HTTP requests answered, by method, route template and status code',
    labelNames: ['method', 'route', 'code'],
  });
  const requestSeconds = registry.histogram({
    name: `${prefix}_http_request_duration_seconds`,
    help: 'HTTP request duration, by method and route template',
    labelNames: ['method', 'route'],
    buckets: FAST,
  });
  const probes = registry.counter({
    name: `${prefix}_readiness_probes_total`,
    help: 'Database write probes (for /readyz and /metrics), by outcome',
    labelNames: ['outcome'],
  });
  const probeSeconds = registry.histogram({
    name: `${prefix}_readiness_probe_duration_seconds`,
    help: 'Database write probe latency, by outcome',
    labelNames: ['outcome'],
    buckets: FAST,
  });
  // Whole pools and single connections are different events (one ends every connection of a pool,
  // the other one connection at POOL_MAX_LIFETIME_S): two counters, so a rate of either means one thing.
  const disposals = registry.counter({
    name: `${prefix}_db_pool_disposals_total`,
    help: 'Whole database pools thrown away and rebuilt, by pool and cause',
    labelNames: ['pool', 'cause'],
  });
  const damped = registry.counter({
    name: `${prefix}_db_pool_disposals_damped_total`,
    help: 'Pool disposals held back during a failover episode because the pool was built since it began',
    labelNames: ['pool'],
  });
  const retired = registry.counter({
    name: `${prefix}_db_connections_retired_total`,
    help: 'Single pool connections ended at their maximum lifetime (POOL_MAX_LIFETIME_S), by pool',
    labelNames: ['pool'],
  });
  const ticks = registry.counter({
    name: `${prefix}_tick_runs_total`,
    help: 'Scheduled tick runs, by tick and outcome (ok, retried after a poisoned pool, crashed, skipped)',
    labelNames: ['tick', 'outcome'],
  });
  // Known label sets start at 0, so a rate or an increase() works from the first scrape.
  for (const outcome of PROBE_OUTCOMES) probes.inc({ outcome }, 0);
  for (const pool of ['app', 'probe'] as const satisfies readonly ReportedPool[]) {
    for (const cause of DISPOSAL_CAUSES) disposals.inc({ pool, cause }, 0);
    damped.inc({ pool }, 0);
    retired.inc({ pool }, 0);
  }
  const tickSeconds = registry.histogram({
    name: `${prefix}_tick_duration_seconds`,
    help: 'Scheduled tick run duration, by tick',
    labelNames: ['tick'],
    buckets: SLOW,
  });
  return {
    request(method, route, status, seconds) {
      requests.inc({ method, route, code: String(status) });
      requestSeconds.observe({ method, route }, seconds);
    },
    probe(outcome, seconds) {
      probes.inc({ outcome });
      probeSeconds.observe({ outcome }, seconds);
    },
    disposal: (pool, cause) => disposals.inc({ pool, cause: DISPOSAL_LABELS[cause.source] }),
    disposalDamped: (pool) => damped.inc({ pool }),
    observePool: (pool, client) => countRetirements(client, () => retired.inc({ pool })),
    tick(name, outcome, seconds) {
      ticks.inc({ tick: name, outcome });
      if (outcome !== 'skipped') tickSeconds.observe({ tick: name }, seconds);
    },
  };
}
