// An answer sent before the body was read (packages/platform/src/http/node-early-answers.ts), on a bare Node
// HTTP server in process: the rest of the body is read and thrown away, up to the bound, then a
// `Connection: close` answer closes with a FIN; past the bound the connection is cut.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { drainEarlyAnswers } from '@honest-health/platform/internal/http/node-early-answers';
import { afterEach, describe, expect, it } from 'vitest';
import { slowUpload } from '../support/raw-http.js';

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((done) => server?.close(done) ?? done(undefined));
});

async function earlyAnswering(maxBytes: number, close: boolean): Promise<number> {
  server = createServer((_req, res) => {
    res.writeHead(413, { 'content-type': 'application/json', ...(close ? { connection: 'close' } : {}) });
    res.end('{"error":{"code":"payload_too_large"}}');
  });
  drainEarlyAnswers(server, maxBytes);
  await new Promise<void>((done) => server?.listen(0, '127.0.0.1', done));
  return (server.address() as AddressInfo).port;
}

const head = (bytes: number) => `POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: ${bytes}\r\n\r\n`;
const MiB = 1024 * 1024;

describe('early answers on Node', () => {
  it('reads a slow 2 MiB body to its end after a 413 with Connection: close, then sends a FIN', async () => {
    const port = await earlyAnswering(4 * MiB, true);
    const upload = await slowUpload(port, head(2 * MiB), 2 * MiB, { chunkBytes: 128 * 1024, gapMs: 30 });
    expect(upload.response).toMatch(/^HTTP\/1\.1 413 /);
    expect(upload).toMatchObject({ error: undefined, sent: 2 * MiB, ended: 'end' });
  });

  it('keeps a keep-alive answer usable: the rest is discarded and the connection stays open', async () => {
    const port = await earlyAnswering(4 * MiB, false);
    const upload = await slowUpload(port, head(MiB), MiB, {
      chunkBytes: 128 * 1024,
      gapMs: 10,
      timeoutMs: 1500,
    });
    expect(upload.response).toMatch(/^HTTP\/1\.1 413 /);
    expect(upload).toMatchObject({ error: undefined, sent: MiB, ended: 'timeout' });
  });

  it('cuts a client that sends past the bound', async () => {
    const port = await earlyAnswering(256 * 1024, true);
    const upload = await slowUpload(port, head(16 * MiB), 16 * MiB, { chunkBytes: 64 * 1024, gapMs: 5 });
    expect(upload.response).toMatch(/^HTTP\/1\.1 413 /);
    // Closed long before the body's end (a FIN or a reset, whichever the kernel had to send).
    expect(upload.ended).not.toBe('timeout');
    expect(upload.sent).toBeLessThan(4 * MiB);
  });
});
