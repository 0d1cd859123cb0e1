import { count } from 'drizzle-orm';
import type { DatabaseHandle } from '../../platform/db/handle.js';
import type { GaugeRegistry } from '../../platform/metrics/registry.js';
import { withTimeout } from '../../platform/timeout.js';
import { invoicePushes, PUSH_STATUSES } from '../schema.js';

/**
 * Invoice pushes by status, counted at scrape time: a number the database holds, so it means the
 * same on every replica and on Workers. It runs on the probe's own small pool and is bounded, so a
 * scrape still answers while the application pool is exhausted or the database is away.
 */
export function observeQueueDepth(
  registry: GaugeRegistry,
  database: DatabaseHandle,
  timeoutMs: number,
): void {
  registry.gauge(
    { name: 'honest_health_queue_depth', help: 'Invoice pushes by status', labelNames: ['status'] },
    async () => {
      const rows = await withTimeout(
        database.db
          .select({ status: invoicePushes.status, n: count() })
          .from(invoicePushes)
          .groupBy(invoicePushes.status),
        timeoutMs,
        'counting the push queue',
      );
      const counts = new Map(rows.map((r) => [r.status, r.n]));
      return PUSH_STATUSES.map((status) => ({ labels: { status }, value: counts.get(status) ?? 0 }));
    },
  );
}
