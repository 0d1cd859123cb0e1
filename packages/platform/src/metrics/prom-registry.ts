import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { registerDefaultMetrics } from './default-metrics.js';
import type { MetricsRegistry } from './registry.js';

export interface PromRegistryOptions {
  /** A gauge's collector failed (the database is down, say): its samples are left out of this scrape. */
  onCollectError(metric: string, err: unknown): void;
}

/**
 * Node and Bun: prom-client, with its default process metrics (CPU, memory, event-loop lag, GC).
 * A registry of its own, not prom-client's global one, so two servers in one process never share.
 * The event-loop lag starts after the first scrape (default-metrics.ts says why), so it is absent
 * from that one and measured from then on.
 */
export function createPromRegistry(options: PromRegistryOptions): MetricsRegistry {
  const registry = new Registry();
  const defaults = registerDefaultMetrics(registry);
  return {
    counter: ({ name, help, labelNames }) => {
      const counter = new Counter({ name, help, labelNames, registers: [registry] });
      return { inc: (labels, value = 1) => counter.inc(labels, value) };
    },
    histogram: ({ name, help, labelNames, buckets }) => {
      const histogram = new Histogram({ name, help, labelNames, buckets, registers: [registry] });
      return { observe: (labels, value) => histogram.observe(labels, value) };
    },
    gauge: ({ name, help, labelNames }, collect) => {
      new Gauge({
        name,
        help,
        labelNames,
        registers: [registry],
        async collect() {
          this.reset();
          try {
            for (const { labels, value } of await collect()) this.set(labels, value);
          } catch (err) {
            options.onCollectError(name, err);
          }
        },
      });
    },
    render: async () => {
      const text = await registry.metrics();
      // After rendering: started before, its gauges would report an empty histogram (a minimum of
      // 2^63 ns) for this scrape.
      defaults.startEventLoopLag();
      return text;
    },
  };
}
