// The Node connection guard (packages/platform/src/http/node-connections.ts) tells idle sockets from busy ones
// by the server's public events alone: a socket silent past the idle timeout is closed, one whose
// request is still being answered is not, and at the cap the idle one goes, not the busy one.
import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { createLogger } from '@honest-health/platform';
import { afterEach, describe, expect, it } from 'vitest';
import { guardConnections } from '../src/http/node-connections.js';

const log = createLogger('error', {}, () => {});
const servers: Server[] = [];
const sockets: Socket[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(
    servers.splice(0).map((s) => {
      s.closeAllConnections();
      return new Promise((resolve) => s.close(resolve));
    }),
  );
});

/** A server whose /slow answers after `slowMs`, silent until then; every other path at once. */
async function serve(options: { max?: number; idleTimeoutMs: number; slowMs: number }): Promise<number> {
  const server = createServer((req, res) => {
    const delay = req.url === '/slow' ? options.slowMs : 0;
    setTimeout(() => res.end('ok'), delay);
  });
  servers.push(server);
  // Node sets a finished keep-alive response's socket timeout to keepAliveTimeout (5 s by default).
  server.keepAliveTimeout = options.idleTimeoutMs;
  guardConnections(server, { max: options.max, idleTimeoutMs: options.idleTimeoutMs, log });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.on('error', reject);
    sockets.push(socket);
  });
}

/** Sends one request; resolves with what came back before the socket closed or the answer ended. */
function request(socket: Socket, path: string): Promise<{ answer: string; closed: boolean }> {
  return new Promise((resolve) => {
    let answer = '';
    const done = (closed: boolean) => {
      socket.removeAllListeners('data');
      resolve({ answer, closed });
    };
    socket.on('data', (chunk) => {
      answer += String(chunk);
      if (answer.endsWith('ok')) done(false);
    });
    socket.once('close', () => done(true));
    socket.write(`GET ${path} HTTP/1.1\r\nHost: test\r\n\r\n`);
  });
}

const closed = (socket: Socket) => new Promise<void>((resolve) => socket.once('close', () => resolve()));

describe('the connection guard', () => {
  it('keeps a socket whose request is answered after the idle timeout, and closes it once idle', async () => {
    const port = await serve({ idleTimeoutMs: 200, slowMs: 700 });
    const socket = await open(port);
    const { answer, closed: cut } = await request(socket, '/slow');
    expect(cut).toBe(false);
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
    const startedAt = Date.now();
    await closed(socket);
    // keepAliveTimeout plus the second Node adds to it (http.Server keepAliveTimeoutBuffer).
    expect(Date.now() - startedAt).toBeLessThan(4000);
  });

  it('at the cap closes the idle connection, not the one with a request in flight', async () => {
    const port = await serve({ max: 2, idleTimeoutMs: 60_000, slowMs: 700 });
    const busy = await open(port);
    const idle = await open(port);
    await request(idle, '/fast');
    const slow = request(busy, '/slow');
    await new Promise((r) => setTimeout(r, 100));
    const idleClosed = closed(idle);
    await open(port);
    await idleClosed;
    const { answer, closed: cut } = await slow;
    expect(cut).toBe(false);
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
  });
});
