import type { AppMetricsContext, GaugeRegistry } from '@honest-health/platform';
import { withTimeout } from '@honest-health/platform';
import { count } from 'drizzle-orm';
import { invoicePushes, PUSH_STATUSES } from '../schema.js';

/**
 * Invoice pushes by status: a number the database holds, so it means the same on every replica and on
 * Workers. A COUNT over every organization's pushes, so it is read at most once per cache window
 * whatever the scrape rate, on the application's pool (never the probe's: readiness keeps its two
 * connections), and bounded, so a scrape still answers while that pool is exhausted.
 */
export function observeQueueDepth(
  registry: GaugeRegistry,
  { database, cache, timeoutMs }: AppMetricsContext,
): void {
  registry.gauge(
    { name: 'honest_health_queue_depth', help: 'Invoice pushes by status', labelNames: ['status'] },
    async () => {
      const rows = await cache('queue depth', () =>
        withTimeout(
          database.db
            .select({ status: invoicePushes.status, n: count() })
            .from(invoicePushes)
            .groupBy(invoicePushes.status),
          timeoutMs,
          'counting the push queue',
        ),
      );
      const counts = new Map(rows.map((r) => [r.status, r.n]));
      return PUSH_STATUSES.map((status) => ({ labels: { status }, value: counts.get(status) ?? 0 }));
    },
  );
}
