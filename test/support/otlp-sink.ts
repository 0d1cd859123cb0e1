// A local OTLP/HTTP collector (JSON encoding, POST /v1/traces), so trace export is tested for real.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { until } from './until.js';

type AttributeValue = string | number | boolean;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, AttributeValue>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  resource: Record<string, AttributeValue>;
}

export interface OtlpSink {
  /** The base endpoint, as OTEL_EXPORTER_OTLP_ENDPOINT takes it. */
  endpoint: string;
  spans: ReceivedSpan[];
  /** Every request body as received, for scanning. */
  bodies: string[];
  /** Spans received so far, kept or not. */
  readonly received: number;
  waitFor(predicate: (span: ReceivedSpan) => boolean, timeoutMs?: number): Promise<ReceivedSpan>;
  close(): Promise<void>;
}

interface OtlpKeyValue {
  key: string;
  value: { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
}

const flatten = (attributes: OtlpKeyValue[] = []): Record<string, AttributeValue> =>
  Object.fromEntries(
    attributes.map(({ key, value }) => [
      key,
      value.stringValue ?? value.boolValue ?? value.doubleValue ?? Number(value.intValue),
    ]),
  );

export interface OtlpSinkOptions {
  /** false: only count spans (a benchmark's load would fill memory with them). Default true. */
  keep?: boolean;
}

export async function startOtlpSink({ keep = true }: OtlpSinkOptions = {}): Promise<OtlpSink> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  let received = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      let body = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
      const text = body.toString('utf8');
      received += text.split('"spanId"').length - 1;
      if (!keep) {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        return;
      }
      bodies.push(text);
      const request = JSON.parse(text) as {
        resourceSpans?: {
          resource?: { attributes?: OtlpKeyValue[] };
          scopeSpans?: {
            spans?: {
              traceId: string;
              spanId: string;
              parentSpanId?: string;
              name: string;
              kind: number;
              attributes?: OtlpKeyValue[];
              status?: { code?: number };
            }[];
          }[];
        }[];
      };
      for (const rs of request.resourceSpans ?? []) {
        const resource = flatten(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            spans.push({
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId || undefined,
              name: s.name,
              kind: s.kind,
              attributes: flatten(s.attributes),
              statusCode: s.status?.code ?? 0,
              resource,
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    bodies,
    get received() {
      return received;
    },
    waitFor: async (predicate, timeoutMs = 15_000) =>
      (await until(
        async () => spans.find(predicate),
        (span) => span !== undefined,
        timeoutMs,
        50,
      )) as ReceivedSpan,
    close: () =>
      new Promise((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}
