import type { DatabaseHandle } from '../platform/db/handle.js';
import type { WriteProbe } from '../platform/db/probe.js';
import type { MonitoredTick, TickHealthPolicy } from '../platform/jobs/tick-health.js';
import { readTickHealth } from '../platform/jobs/tick-health-store.js';
import type { Logger } from '../platform/log.js';
import { observeDatabase, observePools } from '../platform/metrics/db-gauges.js';
import { platformMetrics } from '../platform/metrics/platform-metrics.js';
import type { MetricsRegistry } from '../platform/metrics/registry.js';
import { observeTickHealth } from '../platform/metrics/tick-gauges.js';
import type { TelemetryConfig } from '../platform/telemetry/config.js';
import type { Telemetry } from '../platform/telemetry/telemetry.js';
import { withTimeout } from '../platform/timeout.js';
import { observeQueueDepth } from './metrics/queue-depth.js';
import { tokenRefreshCounter } from './metrics/token-refreshes.js';
import type { RefreshTickResult } from './ticks/refresh-tokens.js';

export interface TelemetryBootOptions {
  /** Swapped in place: everything built before boot reads its fields on every use. */
  telemetry: Telemetry;
  config: TelemetryConfig;
  instanceId: string;
  app: DatabaseHandle;
  probeDatabase: DatabaseHandle;
  probe: WriteProbe;
  probeTimeoutMs: number;
  ticks: readonly MonitoredTick[];
  tickPolicy: TickHealthPolicy;
  log: Logger;
}

export interface StartedTelemetry {
  registry: MetricsRegistry;
  countRefreshes(result: RefreshTickResult): void;
}

// The telemetry boot step (Node and Bun), in two parts: prom-client metrics first, so that a malformed
// trace exporter, which throws in the second part and makes the step a warning, does not cost the
// metrics as well. Both load their libraries only now, so a boot without them pays nothing.

export async function startMetrics(options: TelemetryBootOptions): Promise<StartedTelemetry> {
  const { createPromRegistry } = await import('../platform/metrics/prom-registry.js');
  const registry = createPromRegistry({
    onCollectError: (metric, err) => options.log.warn('metrics collector failed', { metric, err }),
  });
  options.telemetry.metrics = platformMetrics(registry);
  observePools(registry, [options.app, options.probeDatabase]);
  observeDatabase(registry, options.probe);
  observeQueueDepth(registry, options.probeDatabase, options.probeTimeoutMs);
  observeTickHealth(registry, options.ticks, options.tickPolicy, () =>
    withTimeout(readTickHealth(options.probeDatabase.pool), options.probeTimeoutMs, 'tick health'),
  );
  return { registry, countRefreshes: tokenRefreshCounter(registry) };
}

/** OpenTelemetry, when an exporter is configured; throws on a malformed endpoint. */
export async function startTracing({
  telemetry,
  config,
  instanceId,
  log,
}: TelemetryBootOptions): Promise<void> {
  if (config.tracesEndpoint === undefined) return;
  const { startOtelTracing } = await import('../platform/telemetry/otel.js');
  telemetry.tracing = startOtelTracing({
    endpoint: config.tracesEndpoint,
    serviceName: config.serviceName,
    instanceId,
    log,
  });
  log.info('tracing on: exporting OTLP/HTTP', { service: config.serviceName });
}
