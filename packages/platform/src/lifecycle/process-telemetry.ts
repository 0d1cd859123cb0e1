import type { DatabaseHandle } from '../db/handle.js';
import type { WriteProbe } from '../db/probe.js';
import type { AppEnv, AppInstance } from '../http/module.js';
import { observeTickHealth } from '../http/tick-gauges.js';
import type { MonitoredTick, TickHealthPolicy } from '../jobs/tick-health.js';
import { readTickHealth } from '../jobs/tick-health-store.js';
import { observeDatabase, observePools } from '../metrics/db-gauges.js';
import { platformMetrics } from '../metrics/platform-metrics.js';
import type { MetricsRegistry } from '../metrics/registry.js';
import { createScrapeCache } from '../metrics/scrape-cache.js';
import type { TelemetryConfig } from '../telemetry/config.js';
import type { Identity } from '../util/identity.js';
import type { Logger } from '../util/log.js';
import type { PlatformMetrics } from '../util/telemetry.js';
import { withTimeout } from '../util/timeout.js';
import type { Tracing } from '../util/tracing.js';

// The process's telemetry boot step, in two parts: prom-client metrics, then OpenTelemetry when an
// exporter is configured. Both load their libraries only now, so a boot without them pays nothing.

export interface StartedMetrics {
  registry: MetricsRegistry;
  platform: PlatformMetrics;
  /** Sees each successful tick run's result (the app's counters), when the app counts any. */
  tickResult: ((tick: string, result: unknown) => void) | undefined;
  /** Registers the gauges read from the database parts, once the pool step has built them. */
  observe(
    databases: { appDatabase: DatabaseHandle; probeDatabase: DatabaseHandle; writeProbe: WriteProbe },
    ticks: readonly MonitoredTick[],
    policy: TickHealthPolicy,
    timeoutMs: number,
  ): void;
}

export async function startMetrics<E extends AppEnv>(
  app: AppInstance<E>,
  identity: Identity,
  log: Logger,
): Promise<StartedMetrics> {
  const prefix = identity.metricPrefix;
  const { createPromRegistry } = await import('../metrics/prom-registry.js');
  const registry = createPromRegistry({
    onCollectError: (metric, err) => log.warn('metrics collector failed', { metric, err }),
  });
  return {
    registry,
    platform: platformMetrics(registry, prefix),
    tickResult: app.metrics?.counters?.(registry).tickResult,
    observe: (databases, ticks, policy, timeoutMs) => {
      // The readings that query the database: cached, and on the application's pool (http/module.ts).
      const cache = createScrapeCache();
      observePools(registry, [databases.appDatabase, databases.probeDatabase], prefix);
      observeDatabase(registry, databases.writeProbe, prefix);
      app.metrics?.gauges?.(registry, { database: databases.appDatabase, cache, timeoutMs });
      observeTickHealth(registry, prefix, ticks, policy, () =>
        cache('tick health', () =>
          withTimeout(readTickHealth(databases.appDatabase.pool), timeoutMs, 'tick health'),
        ),
      );
    },
  };
}

/** OpenTelemetry, when an exporter is configured; throws on a malformed endpoint. */
export async function startTracing(
  config: TelemetryConfig,
  instanceId: string,
  log: Logger,
): Promise<Tracing | undefined> {
  if (config.tracesEndpoint === undefined) return undefined;
  const { startOtelTracing } = await import('../telemetry/otel.js');
  const tracing = startOtelTracing({
    endpoint: config.tracesEndpoint,
    serviceName: config.serviceName,
    tracerName: config.tracerName,
    instanceId,
    log,
  });
  log.info('tracing on: exporting OTLP/HTTP', { service: config.serviceName });
  return tracing;
}
