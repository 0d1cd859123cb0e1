import type { PoolRole, PoolStats } from '../db/types.js';
import { PROBE_OUTCOMES, type ProbeOutcome } from '../util/telemetry.js';
import type { GaugeRegistry } from './registry.js';

// Gauges read at scrape time from the pools and the write probe. observeDatabase is all that Workers
// serve of the platform's metrics, so this file stays apart from the counters.

/** Pool gauges, read from the handles at scrape time: waiting > 0 is the pool-exhaustion signal. */
export function observePools(
  registry: GaugeRegistry,
  pools: readonly { role: PoolRole; stats(): PoolStats }[],
  prefix: string,
): void {
  const gauge = (name: string, help: string, value: (s: PoolStats) => number) =>
    registry.gauge({ name: `${prefix}_${name}`, help, labelNames: ['pool'] }, () =>
      pools.map((p) => ({ labels: { pool: p.role }, value: value(p.stats()) })),
    );
  gauge('db_pool_size', 'Open connections in the pool', (s) => s.total);
  gauge('db_pool_idle', 'Open connections not lent out', (s) => s.idle);
  gauge('db_pool_in_use', 'Connections lent out', (s) => s.total - s.idle);
  gauge('db_pool_waiting', 'Callers queued for a connection (pool exhaustion)', (s) => s.waiting);
}

/** A scrape reuses a probe result at most this old (one a /readyz just ran), else probes afresh. */
export const SCRAPE_PROBE_MAX_AGE_MS = 1000;

/**
 * The database as a write probe sees it at scrape time: one sample per status (1 for the current
 * one), the probe's latency and its age. Each scrape gets a result at most SCRAPE_PROBE_MAX_AGE_MS
 * old, so a setup that only scrapes never reports a status from before an outage. The probe is the
 * one /readyz uses: single flight (a scrape and a flood of /readyz share one) and bounded by its
 * timeout (PROBE_TIMEOUT_MS, 2 s by default, inside Prometheus' default 10 s scrape timeout).
 */
export function observeDatabase(
  registry: GaugeRegistry,
  probe: {
    fresh(maxAgeMs: number): Promise<{ status: ProbeOutcome; latencyMs: number }>;
    readonly ageSeconds: number | undefined;
  },
  prefix: string,
  maxAgeMs = SCRAPE_PROBE_MAX_AGE_MS,
): void {
  // fresh() joins a probe in flight and returns a result that young as it is: the gauges of one
  // scrape share one probe.
  const result = () => probe.fresh(maxAgeMs);
  registry.gauge(
    {
      name: `${prefix}_database_status`,
      help: 'Database status from a write probe at most 1 s old at scrape time: 1 for the current status',
      labelNames: ['status'],
    },
    async () => {
      const { status } = await result();
      return PROBE_OUTCOMES.map((s) => ({ labels: { status: s }, value: s === status ? 1 : 0 }));
    },
  );
  registry.gauge(
    {
      name: `${prefix}_database_probe_latency_seconds`,
      help: `Latency of the write probe behind ${prefix}_database_status`,
      labelNames: [],
    },
    async () => [{ labels: {}, value: (await result()).latencyMs / 1000 }],
  );
  registry.gauge(
    {
      name: `${prefix}_database_probe_age_seconds`,
      help: `Age of the write probe result behind ${prefix}_database_status`,
      labelNames: [],
    },
    async () => {
      await result();
      return [{ labels: {}, value: probe.ageSeconds ?? 0 }];
    },
  );
}
