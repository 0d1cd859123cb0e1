// The platform carries no product name: the app module's identity names the metrics, the lock file,
// the tracer and the service; an app that names nothing runs as `app`. honest-health passes its own
// name, so every name operators and dashboards know stays as it was.
import {
  DEFAULT_IDENTITY,
  type GaugeRegistry,
  lockFileOf,
  type MetricsRegistry,
  resolveIdentity,
} from '@honest-health/platform';
import { observeTickHealth } from '@honest-health/platform/internal/http/tick-gauges';
import { observeDatabase, observePools } from '@honest-health/platform/internal/metrics/db-gauges';
import { platformMetrics } from '@honest-health/platform/internal/metrics/platform-metrics';
import { loadTelemetryConfig } from '@honest-health/platform/internal/telemetry/config';
import { describe, expect, it } from 'vitest';
import { honestHealth } from '../../src/app/module.js';

// As dashboards, alerts and docs/observability.md know them.
const HONEST_HEALTH_METRICS = [
  'honest_health_database_probe_age_seconds',
  'honest_health_database_probe_latency_seconds',
  'honest_health_database_status',
  'honest_health_db_connections_retired_total',
  'honest_health_db_pool_disposals_damped_total',
  'honest_health_db_pool_disposals_total',
  'honest_health_db_pool_idle',
  'honest_health_db_pool_in_use',
  'honest_health_db_pool_size',
  'honest_health_db_pool_waiting',
  'honest_health_http_request_duration_seconds',
  'honest_health_http_requests_total',
  'honest_health_readiness_probe_duration_seconds',
  'honest_health_readiness_probes_total',
  'honest_health_tick_consecutive_failures',
  'honest_health_tick_duration_seconds',
  'honest_health_tick_healthy',
  'honest_health_tick_last_success_timestamp_seconds',
  'honest_health_tick_runs_total',
];

/** Every metric name the platform registers under `prefix`, counters, histograms and gauges. */
function platformMetricNames(prefix: string): string[] {
  const names: string[] = [];
  const gauges: GaugeRegistry = { gauge: ({ name }) => void names.push(name), render: async () => '' };
  const registry: MetricsRegistry = {
    ...gauges,
    counter: ({ name }) => {
      names.push(name);
      return { inc: () => {} };
    },
    histogram: ({ name }) => {
      names.push(name);
      return { observe: () => {} };
    },
  };
  platformMetrics(registry, prefix);
  observePools(registry, [], prefix);
  observeDatabase(registry, { fresh: async () => ({ status: 'ok', latencyMs: 0 }), ageSeconds: 0 }, prefix);
  const policy = { intervals: 3, failures: 2 };
  observeTickHealth(registry, prefix, [{ name: 't', intervalMs: 1000 }], policy, async () => ({
    nowMs: 0,
    rows: [],
  }));
  return names.sort();
}

describe('identity', () => {
  it('defaults to neutral names, and derives a Prometheus-safe metric prefix from the name', () => {
    expect(DEFAULT_IDENTITY).toEqual({ name: 'app', metricPrefix: 'app' });
    expect(resolveIdentity({ name: 'honest-health' })).toEqual({
      name: 'honest-health',
      metricPrefix: 'honest_health',
    });
    expect(resolveIdentity({ name: '2fa.svc' }).metricPrefix).toBe('_2fa_svc');
    expect(resolveIdentity({ name: 'shop', metricPrefix: 'acme_shop' }).metricPrefix).toBe('acme_shop');
    expect(() => resolveIdentity({ name: 'shop', metricPrefix: 'acme-shop' })).toThrow(
      /not a Prometheus metric name/,
    );
  });

  it('names all 19 of the platform metrics with the prefix; `app_` when the module names nothing', () => {
    const app = platformMetricNames(DEFAULT_IDENTITY.metricPrefix);
    expect(app).toHaveLength(19);
    expect(app.every((n) => n.startsWith('app_'))).toBe(true);
    expect(platformMetricNames('shop').every((n) => n.startsWith('shop_'))).toBe(true);
  });

  it('honest-health keeps its names: the 19 honest_health_* metrics, the service, the lock file', () => {
    const identity = resolveIdentity(honestHealth.identity);
    expect(platformMetricNames(identity.metricPrefix)).toEqual(HONEST_HEALTH_METRICS);
    expect(lockFileOf(identity)).toBe('honest-health.lock');
    const telemetry = loadTelemetryConfig({}, identity);
    expect([telemetry.serviceName, telemetry.tracerName]).toEqual(['honest-health', 'honest-health']);
    expect(loadTelemetryConfig({ OTEL_SERVICE_NAME: 'billing' }, identity).serviceName).toBe('billing');
  });
});
