import {
  type Span as OtelSpan,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  trace,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  getNumberFromEnv,
  getStringFromEnv,
  loggingErrorHandler,
  setGlobalErrorHandler,
  W3CTraceContextPropagator,
} from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { errorCode } from '../util/error-chain.js';
import { type Logger, sqlstateOf } from '../util/log.js';
import { withTimeout } from '../util/timeout.js';
import { type SpanKind as Kind, noSpan, type Span, type SpanOptions, type Tracing } from '../util/tracing.js';
import { traceQueries } from './db-spans.js';

// Node and Bun: the OpenTelemetry SDK, exporting OTLP/HTTP (JSON) in batches from a background timer,
// so no request ever waits on the collector; a full queue drops spans instead. Loaded by the
// telemetry boot step only when an endpoint is configured. Nothing is registered globally: the
// context manager and the propagator are used directly, so a Bun hot reload can start a fresh one.

export interface OtelTracingOptions {
  /** The OTLP/HTTP traces URL (…/v1/traces). Throws when it is not an http(s) URL. */
  endpoint: string;
  serviceName: string;
  tracerName: string;
  instanceId: string;
  log: Logger;
}

const KIND: Record<Kind, SpanKind> = {
  server: SpanKind.SERVER,
  client: SpanKind.CLIENT,
  internal: SpanKind.INTERNAL,
};

const headerGetter: TextMapGetter<Headers> = {
  get: (headers, key) => headers.get(key) ?? undefined,
  keys: (headers) => [...headers.keys()],
};

// Export failures repeat every batch while a collector is down: one warning a minute is enough.
const WARN_EVERY_MS = 60_000;

export function startOtelTracing(options: OtelTracingOptions): Tracing {
  const url = exporterUrl(options.endpoint);
  // Headers (OTEL_EXPORTER_OTLP_HEADERS: credentials), timeout and compression come from the
  // standard variables, which the exporter reads itself.
  const exporter = new OTLPTraceExporter({ url });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({
      'service.name': options.serviceName,
      'service.instance.id': options.instanceId,
    }),
    sampler: samplerFromEnv(),
    spanProcessors: [new BatchSpanProcessor({ exporter, ...batchOptionsFromEnv() })],
  });
  const contexts = new AsyncLocalStorageContextManager().enable();
  const propagator = new W3CTraceContextPropagator();
  const tracer = provider.getTracer(options.tracerName);

  let warnedAt = -Infinity;
  let suppressed = 0;
  setGlobalErrorHandler((err) => {
    if (performance.now() - warnedAt < WARN_EVERY_MS) {
      suppressed += 1;
      return;
    }
    warnedAt = performance.now();
    options.log.warn('trace export failed', { err, suppressed });
    suppressed = 0;
  });

  let stopped = false;
  const start = (name: string, { kind = 'internal', attributes }: SpanOptions, parent = contexts.active()) =>
    tracer.startSpan(name, { kind: KIND[kind], ...(attributes ? { attributes } : {}) }, parent);

  const tracing: Tracing = {
    active(name, spanOptions, fn) {
      if (stopped) return fn(noSpan);
      const base = spanOptions.root ? ROOT_CONTEXT : contexts.active();
      const parent = spanOptions.headers ? propagator.extract(base, spanOptions.headers, headerGetter) : base;
      const span = start(name, spanOptions, parent);
      return contexts.with(trace.setSpan(parent, span), async () => {
        try {
          return await fn(wrap(span));
        } catch (err) {
          markFailed(span, err);
          throw err;
        } finally {
          span.end();
        }
      });
    },
    child(name, spanOptions) {
      if (stopped || !trace.getSpan(contexts.active())) return undefined;
      return wrap(start(name, spanOptions));
    },
    observeQueries: (client) => traceQueries(client, tracing),
    async shutdown(timeoutMs) {
      stopped = true;
      try {
        await withTimeout(provider.shutdown(), timeoutMs, 'shutting down tracing');
      } finally {
        contexts.disable();
        setGlobalErrorHandler(loggingErrorHandler());
      }
    },
  };
  return tracing;
}

function wrap(span: OtelSpan): Span {
  return {
    setAttributes: (attributes) => void span.setAttributes(attributes),
    updateName: (name) => void span.updateName(name),
    fail: (err) => markFailed(span, err),
    end: () => span.end(),
  };
}

// The error's type and SQLSTATE only: messages of wrapped driver errors carry query text and params.
function markFailed(span: OtelSpan, err: unknown): void {
  span.setStatus({ code: SpanStatusCode.ERROR });
  if (err === undefined) return;
  const sqlstate = sqlstateOf(err);
  const type = sqlstate ?? errorCode(err) ?? (err instanceof Error ? err.name : typeof err);
  span.setAttributes({ 'error.type': type, ...(sqlstate ? { 'db.response.status_code': sqlstate } : {}) });
}

// SDK 3 no longer reads the sampler and batch variables itself ("SDK 3.x removed environment-based
// tracer configuration", its migration guide); the exporter still reads its own. We keep honouring the
// standard names, as documented in the OpenTelemetry environment variable specification.
function batchOptionsFromEnv() {
  const options = {
    scheduledDelayMillis: getNumberFromEnv('OTEL_BSP_SCHEDULE_DELAY'),
    exportTimeoutMillis: getNumberFromEnv('OTEL_BSP_EXPORT_TIMEOUT'),
    maxQueueSize: getNumberFromEnv('OTEL_BSP_MAX_QUEUE_SIZE'),
    maxExportBatchSize: getNumberFromEnv('OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
  };
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined && v >= 0));
}

function samplerFromEnv(): Sampler {
  const name = getStringFromEnv('OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on';
  const ratio = () => new TraceIdRatioBasedSampler(getNumberFromEnv('OTEL_TRACES_SAMPLER_ARG') ?? 1);
  const samplers: Record<string, () => Sampler> = {
    always_on: () => new AlwaysOnSampler(),
    always_off: () => new AlwaysOffSampler(),
    traceidratio: ratio,
    parentbased_always_on: () => new ParentBasedSampler({ root: new AlwaysOnSampler() }),
    parentbased_always_off: () => new ParentBasedSampler({ root: new AlwaysOffSampler() }),
    parentbased_traceidratio: () => new ParentBasedSampler({ root: ratio() }),
  };
  const make = samplers[name];
  if (!make) throw new Error(`OTEL_TRACES_SAMPLER is not one of ${Object.keys(samplers).join(', ')}`);
  return make();
}

// The endpoint can carry credentials: the error says what is wrong without repeating it.
function exporterUrl(raw: string): string {
  const url = URL.canParse(raw) ? new URL(raw) : undefined;
  if (!url || !/^https?:$/.test(url.protocol) || !url.hostname) {
    throw new Error(
      'OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is malformed: expected an http(s) URL',
    );
  }
  return url.toString();
}
