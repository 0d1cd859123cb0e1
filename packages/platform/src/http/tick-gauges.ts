import { evaluateTickHealth, type MonitoredTick, type TickHealthPolicy } from '../jobs/tick-health.js';
import type { TickHealthSnapshot } from '../jobs/tick-health-store.js';
import type { GaugeRegistry } from '../metrics/registry.js';

// Tick health as gauges, read from the database at scrape time on every runtime: the table is shared
// by every replica and cron invocation, so any replica's scrape (or the Worker's) tells the whole story.

export function observeTickHealth(
  registry: GaugeRegistry,
  prefix: string,
  ticks: readonly MonitoredTick[],
  policy: TickHealthPolicy,
  read: () => Promise<TickHealthSnapshot>,
): void {
  if (ticks.length === 0) return;
  // The gauges of one scrape share one read.
  let inFlight: Promise<ReturnType<typeof evaluateTickHealth>> | undefined;
  const report = () => {
    inFlight ??= read()
      .then((snapshot) => evaluateTickHealth(snapshot, ticks, policy))
      .finally(() => setTimeout(() => (inFlight = undefined), 0));
    return inFlight;
  };
  registry.gauge(
    {
      name: `${prefix}_tick_last_success_timestamp_seconds`,
      help: 'When the tick last succeeded on any instance, in Unix seconds (absent: never)',
      labelNames: ['tick'],
    },
    async () =>
      Object.entries((await report()).ticks).flatMap(([tick, v]) =>
        v.last_success_at ? [{ labels: { tick }, value: Date.parse(v.last_success_at) / 1000 }] : [],
      ),
  );
  registry.gauge(
    {
      name: `${prefix}_tick_consecutive_failures`,
      help: 'Consecutive failed runs of the tick on its worst instance heard from within K intervals',
      labelNames: ['tick'],
    },
    async () =>
      Object.entries((await report()).ticks).map(([tick, v]) => ({
        labels: { tick },
        value: v.consecutive_failures,
      })),
  );
  registry.gauge(
    {
      name: `${prefix}_tick_healthy`,
      help: 'Whether /healthz/ticks counts the tick healthy (1) or failing or overdue (0)',
      labelNames: ['tick'],
    },
    async () =>
      Object.entries((await report()).ticks).map(([tick, v]) => ({
        labels: { tick },
        value: v.status === 'ok' || v.status === 'pending' ? 1 : 0,
      })),
  );
}
