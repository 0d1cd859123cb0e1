import { noTracing, type Tracing } from './tracing.js';

// What the platform reports to: a port at the bottom of the layers, so db/ and jobs/ report without
// importing telemetry/ or metrics/ above them; metrics/platform-metrics.ts implements it.

export type TickOutcome = 'ok' | 'retried' | 'crashed' | 'skipped';

export const PROBE_OUTCOMES = ['ok', 'unreachable', 'read_only', 'timeout'] as const;
export type ProbeOutcome = (typeof PROBE_OUTCOMES)[number];

/** A pool by role: the same union as db/types.ts PoolRole (platform-metrics.ts checks they agree). */
export type ReportedPool = 'app' | 'probe';

/** Who asked for a disposal: the `source` of db/disposal.ts DisposalCause, all the metric reads. */
export interface ReportedDisposal {
  readonly source: 'probe' | 'tick' | 'request' | 'background';
}

export interface PlatformMetrics {
  request(method: string, route: string, status: number, seconds: number): void;
  probe(outcome: ProbeOutcome, seconds: number): void;
  /** A pool thrown away, with the cause given to dispose(); counted by who asked for it. */
  disposal(pool: ReportedPool, cause: ReportedDisposal): void;
  /** A disposal asked for during a failover episode but held back: the pool was too young (episode.ts). */
  disposalDamped(pool: ReportedPool): void;
  /** A freshly built pool: its single connections retired at max lifetime are counted (a metric of their own). */
  observePool(pool: ReportedPool, client: unknown): void;
  tick(name: string, outcome: TickOutcome, seconds: number): void;
}

export const noMetrics: PlatformMetrics = {
  request() {},
  probe() {},
  disposal() {},
  disposalDamped() {},
  observePool() {},
  tick() {},
};

/**
 * What the platform reports to. The process lifecycle builds it in its telemetry step, before the parts
 * that report to it; Workers use the no-ops (their traces come from Cloudflare's own tracing).
 */
export interface Telemetry {
  readonly tracing: Tracing;
  readonly metrics: PlatformMetrics;
}

export const noTelemetry: Telemetry = Object.freeze({ tracing: noTracing, metrics: noMetrics });
