import { createRequire } from 'node:module';
import { collectDefaultMetrics, type Registry } from 'prom-client';

// prom-client's default process metrics, registered one module at a time so that the event-loop lag
// can start late. Its monitor is perf_hooks.monitorEventLoopDelay at prom-client's 10 ms resolution:
// a libuv timer that wakes the loop 100 times a second whether anyone reads it or not, "causing it to
// run more than necessary and preventing it from idling" (nodejs/node#56064), nearly all the CPU an
// idle server burns (docs/idle-cpu.md). So the lag metrics start at the first scrape: a server nobody
// scrapes pays nothing for them, and from the second scrape on the figures are prom-client's own.

// Every module exports (registry, config) => void and lives at lib/metrics/<name>.js, the names being
// the list collectDefaultMetrics itself runs (it already leaves out what this Node cannot report).
// collectDefaultMetrics has no option to leave one out (prom-client 15: register, prefix, labels,
// gcDurationBuckets, eventLoopMonitoringPrecision), hence the files. prom-client has no `exports` map,
// so they resolve; it is pinned (15.1.3), packages/platform/test/dependency-internals.test.ts fails the moment a
// file is gone, and test/idle-cpu.test.ts checks that every default metric is still served.
type DefaultMetric = (registry: Registry, config: DefaultMetricsConfig) => void;
interface DefaultMetricsConfig {
  eventLoopMonitoringPrecision: number;
}

const EVENT_LOOP_LAG = 'eventLoopLag';
// prom-client's default (lib/defaultMetrics.js: `config = { eventLoopMonitoringPrecision: 10, ...config }`).
const CONFIG: DefaultMetricsConfig = { eventLoopMonitoringPrecision: 10 };

const require = createRequire(import.meta.url);
/** One of prom-client's default metric modules (exported for packages/platform/test/dependency-internals.test.ts). */
export const loadDefaultMetric = (name: string) =>
  require(`prom-client/lib/metrics/${name}.js`) as DefaultMetric;
const load = loadDefaultMetric;

export interface DefaultMetrics {
  /** Starts the event-loop lag monitor and registers its gauges; later calls do nothing. */
  startEventLoopLag(): void;
}

export function registerDefaultMetrics(registry: Registry): DefaultMetrics {
  for (const name of collectDefaultMetrics.metricsList) {
    if (name !== EVENT_LOOP_LAG) load(name)(registry, CONFIG);
  }
  let started = false;
  return {
    startEventLoopLag() {
      if (started) return;
      started = true;
      // Where monitorEventLoopDelay is not implemented (ERR_NOT_IMPLEMENTED, older Bun) the module
      // registers nothing, as collectDefaultMetrics did; Bun 1.4 has it.
      load(EVENT_LOOP_LAG)(registry, CONFIG);
    },
  };
}
