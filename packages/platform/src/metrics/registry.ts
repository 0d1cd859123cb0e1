// The metrics seam. Node and Bun implement it with prom-client (prom-registry.ts); Workers, where
// prom-client does not run and no process lives long enough for counters to mean much, serve only
// gauges read at scrape time (gauges.ts).

/** Prometheus labels, by name. */
export type Labels<L extends string = string> = Record<L, string>;

/** A metric's name, help text and label names. */
export interface MetricDefinition<L extends string> {
  /** Prometheus name, e.g. app_tick_runs_total. */
  name: string;
  help: string;
  labelNames: readonly L[];
}

/** One gauge value, with its labels. */
export interface GaugeSample<L extends string = string> {
  labels: Labels<L>;
  value: number;
}

/** Reads the current values at scrape time (pool stats, queue depth); a failure leaves the gauge empty. */
export type Collect<L extends string> = () => GaugeSample<L>[] | Promise<GaugeSample<L>[]>;

/** Where gauges read at scrape time are declared, and the exposition rendered. */
export interface GaugeRegistry {
  gauge<L extends string>(definition: MetricDefinition<L>, collect: Collect<L>): void;
  /** The exposition in the Prometheus text format, version 0.0.4. */
  render(): Promise<string>;
}

/** A Prometheus counter: `inc` per labels. */
export interface Counter<L extends string> {
  inc(labels: Labels<L>, value?: number): void;
}

/** A Prometheus histogram: `observe` per labels. */
export interface Histogram<L extends string> {
  observe(labels: Labels<L>, value: number): void;
}

/**
 * A gauge registry that also declares counters and histograms (processes; Workers keep no state to count
 * in).
 */
export interface MetricsRegistry extends GaugeRegistry {
  counter<L extends string>(definition: MetricDefinition<L>): Counter<L>;
  histogram<L extends string>(definition: MetricDefinition<L> & { buckets: number[] }): Histogram<L>;
}

/** The `content-type` of the Prometheus text exposition format, version 0.0.4. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
