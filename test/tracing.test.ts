import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { migratedDatabase } from './support/databases.js';
import { createOrg, waitForKey } from './support/orgs.js';
import { type OtlpSink, type ReceivedSpan, startOtlpSink } from './support/otlp-sink.js';
import { freePort } from './support/ports.js';
import type { Cluster } from './support/postgres.js';
import { repoRoot, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import type { Sandbox } from './support/ticks.js';
import { sandboxEnv } from './support/ticks.js';

// Traces leave the process over OTLP/HTTP to a local collector; the exporter is advisory: malformed
// or unreachable, the server boots and serves all the same. (Whether tracing slows requests is a
// benchmark, bench/observability.ts, not a timed test.)

let cluster: Cluster;
let sandbox: Sandbox;
let sink: OtlpSink;
beforeAll(async () => {
  [cluster, sandbox, sink] = await Promise.all([
    sharedCluster(),
    startXeroSandbox({ port: 0 }),
    startOtlpSink(),
  ]);
});
afterAll(async () => {
  await sink?.close();
  await sandbox?.close();
  await cluster?.remove();
});

const SERVER = 2;
const CLIENT = 3;

const childrenOf = (parent: ReceivedSpan) =>
  sink.spans.filter((s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId);

describe('tracing', () => {
  it('exports a request span and a tick span, each with its database spans nested', async () => {
    const url = await migratedDatabase(cluster);
    const server = await spawnServer({
      env: {
        DATABASE_URL: url,
        OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint,
        OTEL_SERVICE_NAME: 'honest-health-test',
        OTEL_BSP_SCHEDULE_DELAY: '100',
        API_KEY_REFRESH_MS: '200',
        TICK_INTERVAL_MS: '300',
        ...sandboxEnv(sandbox),
      },
    });
    try {
      await server.waitForReady();
      const org = await createOrg(url, 'Traced Ltd');
      await waitForKey(server, org.apiKey);

      // The caller's trace context is continued: its trace id, and its span as the parent.
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
      const callerSpan = '00f067aa0ba902b7';
      const res = await server.get('/api/invoices?limit=5', {
        headers: {
          authorization: `Bearer ${org.apiKey}`,
          'x-request-id': 'trace-me-1',
          traceparent: `00-${traceId}-${callerSpan}-01`,
        },
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-request-id')).toBe('trace-me-1');

      const request = await sink.waitFor((s) => s.traceId === traceId && s.kind === SERVER);
      expect(request).toMatchObject({
        name: 'GET /api/invoices',
        parentSpanId: callerSpan,
        attributes: {
          'http.request.method': 'GET',
          'http.route': '/api/invoices',
          'http.response.status_code': 200,
          'url.path': '/api/invoices',
          'request.id': 'trace-me-1',
        },
        resource: { 'service.name': 'honest-health-test' },
      });
      const queries = childrenOf(request);
      expect(queries.length).toBeGreaterThan(0);
      expect(queries.every((q) => q.kind === CLIENT)).toBe(true);
      expect(queries.map((q) => q.name)).toContain('SELECT invoice_pushes');
      expect(queries[0]?.attributes).toMatchObject({ 'db.system.name': 'postgresql' });

      const tick = await sink.waitFor((s) => s.name === 'tick refresh-tokens');
      expect(tick.parentSpanId).toBeUndefined();
      expect(tick.attributes).toMatchObject({ 'tick.name': 'refresh-tokens', 'tick.outcome': 'ok' });
      const tickQueries = childrenOf(tick);
      expect(tickQueries.map((q) => q.name)).toContain('UPDATE xero_grants');

      // A database span carries the operation and table only: no statement text, no parameters.
      const exported = sink.bodies.join('\n');
      expect(exported).not.toContain(org.apiKey);
      expect(exported).not.toContain('sandbox-secret');
      expect(exported).not.toMatch(/"(?:select|update) .*where/i);
      expect(exported).not.toContain(url);

      // Every log line written while the request ran carries its id.
      const requestLines = server.logs.filter((l) => l.request_id === 'trace-me-1');
      expect(
        server.logs.filter((l) => l.tick === 'refresh-tokens').every((l) => typeof l.run_id === 'string'),
      ).toBe(true);
      expect(requestLines.every((l) => l.request_id === 'trace-me-1')).toBe(true);
    } finally {
      await server.stop();
    }
  });

  it('exports from the Bun entry too, with the probe query nested under /readyz', async () => {
    const url = await migratedDatabase(cluster);
    const server = await spawnServer({
      command: resolve(repoRoot, 'node_modules/.bin/bun'),
      args: [resolve(repoRoot, 'src/runtime/bun.ts')],
      env: { DATABASE_URL: url, OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint, OTEL_BSP_SCHEDULE_DELAY: '100' },
    });
    try {
      await server.waitForReady();
      const res = await server.get('/readyz', { headers: { 'x-request-id': 'bun-ready-1' } });
      expect(res.status).toBe(200);
      const request = await sink.waitFor((s) => s.attributes['request.id'] === 'bun-ready-1');
      expect(request.name).toBe('GET /readyz');
      expect(childrenOf(request).map((q) => q.attributes['db.operation.name'])).toContain('WITH');
    } finally {
      await server.stop();
    }
  });

  it('boots with a malformed exporter endpoint: a warning that does not repeat it', async () => {
    const url = await migratedDatabase(cluster);
    const malformed = 'collector.internal:4318 with spaces';
    const server = await spawnServer({ env: { DATABASE_URL: url, OTEL_EXPORTER_OTLP_ENDPOINT: malformed } });
    try {
      await server.waitForReady();
      const warning = server.logs.find((l) => l.msg === 'boot step failed (advisory, continuing)');
      expect(warning).toMatchObject({ level: 'warn', step: 'telemetry' });
      expect(JSON.stringify(warning)).toMatch(/OTEL_EXPORTER_OTLP_ENDPOINT .*is malformed/);
      expect(JSON.stringify(server.logs)).not.toContain(malformed);
      expect((await server.get('/readyz')).status).toBe(200);
      // Metrics come up before tracing in that step, so they survive the bad endpoint.
      const metrics = await server.get('/metrics');
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toContain('honest_health_http_requests_total');
    } finally {
      await server.stop();
    }
  });

  it('boots with an unreachable exporter: requests are answered and export failures are a warning', async () => {
    const url = await migratedDatabase(cluster);
    const closed = await freePort();
    const server = await spawnServer({
      env: {
        DATABASE_URL: url,
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${closed}`,
        OTEL_BSP_SCHEDULE_DELAY: '100',
        // The exporter retries a refused connection until this runs out, then reports the failure.
        OTEL_EXPORTER_OTLP_TIMEOUT: '1000',
      },
    });
    try {
      await server.waitForReady();
      expect(server.logs.some((l) => l.msg === 'boot step failed (advisory, continuing)')).toBe(false);
      for (let i = 0; i < 5; i++) expect((await server.get('/readyz')).status).toBe(200);
      expect((await server.get('/readyz')).status).toBe(200);
      const warning = await server.waitForLog((l) => l.msg === 'trace export failed', 15_000);
      expect(warning.level).toBe('warn');
      expect(server.child.exitCode).toBeNull();
    } finally {
      await server.stop();
    }
  });
});
