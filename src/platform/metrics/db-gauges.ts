import type { PoolRole, PoolStats } from '../db/types.js';
import { PROBE_OUTCOMES, type ProbeOutcome } from './platform-metrics.js';
import type { GaugeRegistry } from './registry.js';

// Gauges read at scrape time from the pools and the write probe. observeDatabase is all that Workers
// serve of the platform's metrics, so this file stays apart from the counters.

/** Pool gauges, read from the handles at scrape time: waiting > 0 is the pool-exhaustion signal. */
export function observePools(
  registry: GaugeRegistry,
  pools: readonly { role: PoolRole; stats(): PoolStats }[],
): void {
  const gauge = (name: string, help: string, value: (s: PoolStats) => number) =>
    registry.gauge({ name, help, labelNames: ['pool'] }, () =>
      pools.map((p) => ({ labels: { pool: p.role }, value: value(p.stats()) })),
    );
  gauge('honest_health_db_pool_size', 'Open connections in the pool', (s) => s.total);
  gauge('honest_health_db_pool_idle', 'Open connections not lent out', (s) => s.idle);
  gauge('honest_health_db_pool_in_use', 'Connections lent out', (s) => s.total - s.idle);
  gauge(
    'honest_health_db_pool_waiting',
    'Callers queued for a connection (pool exhaustion)',
    (s) => s.waiting,
  );
}

/**
 * The database as the write probe last saw it: one sample per status (1 for the current one) and the
 * probe's latency. Without a recent probe (always, on Workers) the scrape runs one.
 */
export function observeDatabase(
  registry: GaugeRegistry,
  probe: {
    check(): Promise<{ status: ProbeOutcome; latencyMs: number }>;
    readonly last: { status: ProbeOutcome; latencyMs: number } | undefined;
  },
): void {
  // check() is single flight and sets `last`: the two gauges of one scrape share one probe.
  const result = async () => probe.last ?? (await probe.check());
  registry.gauge(
    {
      name: 'honest_health_database_status',
      help: 'Database status from the last write probe: 1 for the current status',
      labelNames: ['status'],
    },
    async () => {
      const { status } = await result();
      return PROBE_OUTCOMES.map((s) => ({ labels: { status: s }, value: s === status ? 1 : 0 }));
    },
  );
  registry.gauge(
    {
      name: 'honest_health_database_probe_latency_seconds',
      help: 'Latency of the last database write probe',
      labelNames: [],
    },
    async () => [{ labels: {}, value: (await result()).latencyMs / 1000 }],
  );
}
