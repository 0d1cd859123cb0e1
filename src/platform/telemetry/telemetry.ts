import { noMetrics, type PlatformMetrics } from '../metrics/platform-metrics.js';
import { noTracing, type Tracing } from './tracing.js';

/**
 * What the platform reports to. Components keep this object and read its fields on every use, so the
 * advisory telemetry boot step can swap the no-ops for real tracing and metrics after they were built.
 */
export interface Telemetry {
  tracing: Tracing;
  metrics: PlatformMetrics;
}

export const createTelemetry = (): Telemetry => ({ tracing: noTracing, metrics: noMetrics });

export const noTelemetry: Readonly<Telemetry> = Object.freeze(createTelemetry());
