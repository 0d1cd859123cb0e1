// The tracing seam that shared code (requests, ticks, database queries) writes to. On Node and Bun the
// OpenTelemetry SDK implements it (otel.ts, loaded only when an exporter is configured); elsewhere it is
// the no-op below. Shared code never imports @opentelemetry/api itself: the Worker bundle cannot spare
// its size (docs/worker-bundle.md), and Workers trace through Cloudflare's own tracing instead.

export type SpanKind = 'server' | 'client' | 'internal';

export type SpanAttributes = Record<string, string | number | boolean>;

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: SpanAttributes;
  /** Incoming request headers: a W3C `traceparent` there makes this span part of the caller's trace. */
  headers?: Headers;
  /** Start a new trace whatever span is active (a tick that a request's timer happened to start). */
  root?: boolean;
}

export interface Span {
  setAttributes(attributes: SpanAttributes): void;
  updateName(name: string): void;
  /** Marks the span failed. Records the error's type and SQLSTATE, never its message (query text, params). */
  fail(err?: unknown): void;
  end(): void;
}

export interface Tracing {
  /** Runs `fn` in a new span that is the parent of every span started while `fn` runs; ends it after. */
  active<T>(name: string, options: SpanOptions, fn: (span: Span) => Promise<T>): Promise<T>;
  /** A child of the active span; undefined when none is active (a query alone never starts a trace). */
  child(name: string, options: SpanOptions): Span | undefined;
  /** Gives the queries of a freshly built pool their spans (db-spans.ts); `client` is Drizzle's $client. */
  observeQueries(client: unknown): void;
  /** Flushes and stops; the tracing is a no-op afterwards. */
  shutdown(timeoutMs: number): Promise<void>;
}

export const noSpan: Span = { setAttributes() {}, updateName() {}, fail() {}, end() {} };

export const noTracing: Tracing = {
  active: (_name, _options, fn) => fn(noSpan),
  child: () => undefined,
  observeQueries: () => {},
  shutdown: async () => {},
};
