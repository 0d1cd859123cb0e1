import { noMetrics, type PlatformMetrics } from '../metrics/platform-metrics.js';
import { noTracing, type Tracing } from './tracing.js';

/**
 * What the platform reports to. The process lifecycle builds it in its telemetry step, before the parts
 * that report to it; Workers use the no-ops (their traces come from Cloudflare's own tracing).
 */
export interface Telemetry {
  readonly tracing: Tracing;
  readonly metrics: PlatformMetrics;
}

export const noTelemetry: Telemetry = Object.freeze({ tracing: noTracing, metrics: noMetrics });
