// What load balancers' and orchestrators' checkers send, on the built Node server and on the Bun entry
// run by the real bun binary: HTTP/1.0 without a Host header (HAProxy's default `option httpchk`) over a
// raw socket, and the wrong method on the probe and scrape routes.
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from './support/databases.js';
import { createOrg, waitForKey } from './support/orgs.js';
import type { Cluster } from './support/postgres.js';
import { rawRequest, slowUpload } from './support/raw-http.js';
import { repoRoot, type ServerProcess, type SpawnOptions, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';

const bun = resolve(repoRoot, 'node_modules/.bin/bun');
const runtimes: Record<'node' | 'bun', SpawnOptions> = {
  node: {},
  bun: { command: bun, args: [resolve(repoRoot, 'src/runtime/bun.ts')] },
};

let cluster: Cluster;
const servers: Partial<Record<keyof typeof runtimes, ServerProcess>> = {};
const apiKeys: Partial<Record<keyof typeof runtimes, string>> = {};
beforeAll(async () => {
  cluster = sharedCluster();
  await Promise.all(
    (Object.keys(runtimes) as (keyof typeof runtimes)[]).map(async (name) => {
      const url = await migratedDatabase(cluster);
      const server = await spawnServer({
        ...runtimes[name],
        env: { DATABASE_URL: url, API_KEY_REFRESH_MS: '100' },
      });
      servers[name] = server;
      await server.waitForReady();
      const { apiKey } = await createOrg(url, `Edges ${name}`);
      await waitForKey(server, apiKey);
      apiKeys[name] = apiKey;
    }),
  );
});
afterAll(async () => {
  await Promise.allSettled(Object.values(servers).map((s) => s.stop()));
  await cluster?.remove();
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe.each(Object.keys(runtimes) as (keyof typeof runtimes)[])('%s', (name) => {
  const server = () => {
    const s = servers[name];
    if (!s) throw new Error(`${name} server did not start`);
    return s;
  };

  it.each(['/livez', '/health', '/healthz', '/readyz'])(
    'answers GET %s over HTTP/1.0 without a Host header',
    async (path) => {
      const res = await rawRequest(server().port, `GET ${path} HTTP/1.0\r\n\r\n`);
      expect(res.status, res.raw).toBe(200);
      expect(JSON.parse(res.body)).toMatchObject({ status: 'ok' });
    },
  );

  // `option httpchk /readyz` sends exactly this (HAProxy's default method is OPTIONS).
  it.each(['/livez', '/readyz'])("answers HAProxy's default OPTIONS %s HTTP/1.0 as a probe", async (path) => {
    const res = await rawRequest(server().port, `OPTIONS ${path} HTTP/1.0\r\n\r\n`);
    expect(res.status, res.raw).toBe(200);
    expect(JSON.parse(res.body)).toMatchObject({ status: 'ok' });
  });

  it('answers HAProxy httpchk with a Host header too, and HTTP/1.1 without Host stays a 400', async () => {
    const withHost = await rawRequest(server().port, 'GET /readyz HTTP/1.0\r\nHost: lb.internal\r\n\r\n');
    expect(withHost.status, withHost.raw).toBe(200);
    // HTTP/1.1 requires Host (RFC 9112 section 3.2): refusing that is right, and not our choice to relax.
    const http11 = await rawRequest(server().port, 'GET /livez HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect(http11.status, http11.raw).toBe(400);
  });

  it.each(['/livez', '/health', '/healthz', '/readyz', '/metrics'])(
    'answers POST %s with 405, Allow and a request id',
    async (path) => {
      const res = await server().get(path, { method: 'POST', body: '{}' });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
      expect(res.headers.get('x-request-id')).toMatch(UUID);
      expect(await res.json()).toEqual({
        error: { code: 'method_not_allowed', message: 'use GET, HEAD or OPTIONS' },
      });
    },
  );

  it('still answers GET and HEAD on the probe routes', async () => {
    expect((await server().get('/livez', { method: 'HEAD' })).status).toBe(200);
    expect((await server().get('/readyz', { method: 'HEAD' })).status).toBe(200);
    expect((await server().get('/metrics')).status).toBe(200);
    const options = await server().get('/metrics', { method: 'OPTIONS' });
    expect(options.status).toBe(204);
    expect(options.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
    expect((await server().get('/livez', { method: 'DELETE' })).status).toBe(405);
  });

  // The answer must reach a real client that is still sending: a 2 MiB body over a slow
  // uplink (64 KiB every 40 ms, about 1.3 s) is answered 413 at once, read to its end, and only then
  // is the connection closed, with a FIN. Cutting it early resets the client's writes (EPIPE).
  it('answers a 2 MiB upload on a slow link with 413, reads the rest, then closes cleanly', async () => {
    const bytes = 2 * 1024 * 1024;
    const head =
      'POST /api/invoices HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n' +
      `Authorization: Bearer ${apiKeys[name]}\r\nIdempotency-Key: slow-${name}\r\nContent-Length: ${bytes}\r\n\r\n`;
    const upload = await slowUpload(server().port, head, bytes);
    expect(upload.response).toMatch(/^HTTP\/1\.1 413 /);
    expect(upload.response).toContain('"code":"payload_too_large"');
    expect(upload.response.toLowerCase()).toContain('connection: close');
    expect(upload.error).toBeUndefined();
    expect(upload.sent).toBe(bytes);
    expect(upload.ended).toBe('end');
  });

  // A chunked body is read up to the limit by the app, which then gives up on it: the answer still
  // comes, and the connection is closed rather than left open (it held the server's drain for 22 s).
  it('answers a slow chunked 2 MiB upload with 413 and closes the connection', async () => {
    const bytes = 2 * 1024 * 1024;
    const head =
      'POST /api/invoices HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n' +
      `Authorization: Bearer ${apiKeys[name]}\r\nIdempotency-Key: chunked-${name}\r\nTransfer-Encoding: chunked\r\n\r\n`;
    const upload = await slowUpload(server().port, head, bytes, { chunked: true, timeoutMs: 6000 });
    expect(upload.response).toMatch(/^HTTP\/1\.1 413 /);
    expect(upload.response).toContain('"code":"payload_too_large"');
    expect(upload.ended).not.toBe('timeout');
  });
});
