import type { Env } from '../util/config.js';
import type { Identity } from '../util/identity.js';

// Observability settings. Read without validation on purpose: telemetry is an advisory boot step, so a
// malformed exporter URL is a warning from that step (otel.ts), never a configuration error that stops
// the process. The exporter reads its own standard OTEL_* variables (headers, timeout, compression);
// otel.ts reads the sampler and batch ones, which SDK 3 no longer does.

export interface TelemetryConfig {
  /** OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  tracesEndpoint: string | undefined;
  serviceName: string;
  /** The tracer's (instrumentation scope's) name: the app's. */
  tracerName: string;
  /** Bearer token that GET /metrics requires, when set. */
  metricsToken: string | undefined;
}

export function loadTelemetryConfig(env: Env, identity: Identity): TelemetryConfig {
  const value = (name: string) => (env[name] === '' ? undefined : env[name]);
  const base = value('OTEL_EXPORTER_OTLP_ENDPOINT');
  return {
    tracesEndpoint:
      value('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') ??
      (base === undefined ? undefined : `${base.replace(/\/+$/, '')}/v1/traces`),
    serviceName: value('OTEL_SERVICE_NAME') ?? identity.name,
    tracerName: identity.name,
    metricsToken: value('METRICS_TOKEN'),
  };
}
