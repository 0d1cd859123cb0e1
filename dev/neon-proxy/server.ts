// A local stand-in for Neon's proxy: lets the real @neondatabase/serverless drivers (`neon()` over
// HTTP, `Pool`/`Client` over WebSocket) talk to a plain PostgreSQL. Development and tests only.
//
// Security model: it listens on loopback only, and it only ever connects to the one upstream it was
// started with. Hosts named by clients (the `?address=` of the WebSocket URL, the host in the
// Neon-Connection-String header) are ignored; the upstream server authenticates the user.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { type AddressInfo, isIPv4, isIPv6 } from 'node:net';
import type { Duplex } from 'node:stream';
import { DEFAULT_MAX_BODY_BYTES, SqlOverHttp } from './sql-over-http.js';
import { WsPipes } from './ws-pipe.js';

export interface NeonProxyOptions {
  /** `postgres://user@127.0.0.1:5432/db`: only its host and port are used (port defaults to 5432). */
  upstream: string;
  /** 0 (the default) picks a free port. */
  port?: number;
  /** Must be a loopback address: 127.0.0.0/8, ::1 or localhost. Default '127.0.0.1'. */
  host?: string;
  /** Connections per (user, password, database) pool used by `/sql`. Default 10. */
  maxPoolSize?: number;
}

export interface NeonProxyStats {
  /** WebSocket pipes open right now. */
  openWebSockets: number;
  /** WebSocket pipes ever opened. */
  webSocketsTotal: number;
  /** `POST /sql` requests answered, whatever the outcome. */
  httpRequests: number;
  /** SQL statements that ran successfully over HTTP (each statement of a batch counts). */
  httpQueries: number;
  /** Non-200 `/sql` answers, rejected requests/upgrades, and pipes that ended in an error. */
  errors: number;
}

export interface NeonProxy {
  /** The port actually listened on. */
  port: number;
  /** `http://127.0.0.1:PORT`: `${url}/sql` is the fetch endpoint, `${host}:${port}/v2` the WebSocket proxy. */
  url: string;
  /** The configured upstream, the only place the proxy connects to. */
  upstream: { host: string; port: number };
  close(): Promise<void>;
  stats(): NeonProxyStats;
}

/** WebSocket paths accepted: `/v2` is the driver's default shape, `/v1` and `/` are common configs. */
const WS_PATHS = new Set(['/', '/v1', '/v2']);

/** True for localhost (and *.localhost), 127.0.0.0/8 and ::1 (also IPv4-mapped), with or without brackets. */
export function isLoopbackHost(host: string): boolean {
  const name = host
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1');
  if (name === 'localhost' || name.endsWith('.localhost')) return true;
  if (isIPv4(name)) return name.split('.')[0] === '127';
  if (isIPv6(name)) {
    const canonical = new URL(`http://[${name}]/`).hostname; // e.g. [::1], [::ffff:7f00:1]
    return canonical === '[::1]' || /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/.test(canonical);
  }
  return false;
}

function parseUpstream(upstream: string): { host: string; port: number } {
  let url: URL;
  try {
    url = new URL(upstream);
  } catch {
    throw new Error(`upstream must be a postgres:// URL, got ${JSON.stringify(upstream)}`);
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new Error(`upstream must be a postgres:// or postgresql:// URL, got ${url.protocol}`);
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (host === '') throw new Error('upstream must name a host (Unix sockets are not supported)');
  const port = url.port === '' ? 5432 : Number(url.port);
  return { host, port };
}

/** The Host header must name loopback: a page on a DNS-rebound name must not reach the database. */
function hostHeaderOk(request: IncomingMessage): boolean {
  const value = request.headers.host;
  if (value === undefined) return false;
  try {
    return isLoopbackHost(new URL(`http://${value}/`).hostname);
  } catch {
    return false;
  }
}

/**
 * Browsers send Origin; cross-origin WebSockets are not subject to CORS, so without this check any
 * web page could speak the Postgres protocol through the proxy. Non-browser clients send none.
 */
function originOk(request: IncomingMessage): boolean {
  const origin = request.headers.origin;
  if (origin === undefined) return true;
  try {
    return isLoopbackHost(new URL(origin).hostname);
  } catch {
    return false;
  }
}

function pathOf(request: IncomingMessage): string {
  return new URL(request.url ?? '/', 'http://proxy.invalid').pathname;
}

function readBody(request: IncomingMessage, limit: number): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        resolve(undefined);
        request.resume(); // drain the rest without buffering it
        return;
      }
      chunks.push(chunk);
    });
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.on('error', reject);
  });
}

function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
) {
  response.writeHead(status, { 'content-type': 'application/json', ...headers });
  response.end(JSON.stringify(body));
}

function rejectUpgrade(socket: Duplex, status: number, reason: string, message: string): void {
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Type: text/plain\r\n` +
      `Content-Length: ${Buffer.byteLength(message)}\r\n\r\n${message}`,
    () => socket.destroy(),
  );
}

export async function startNeonProxy(options: NeonProxyOptions): Promise<NeonProxy> {
  const host = options.host ?? '127.0.0.1';
  if (!isLoopbackHost(host)) {
    throw new Error(`refusing to listen on ${host}: the Neon proxy binds to loopback addresses only`);
  }
  const upstream = parseUpstream(options.upstream);
  const target = { upstreamHost: upstream.host, upstreamPort: upstream.port };
  const sql = new SqlOverHttp({ ...target, maxPoolSize: options.maxPoolSize });
  const pipes = new WsPipes(target);
  let rejected = 0;

  const handleHttp = async (request: IncomingMessage, response: ServerResponse) => {
    if (!hostHeaderOk(request) || !originOk(request)) {
      rejected++;
      sendJson(response, 403, { message: 'the Neon proxy only serves loopback hosts and origins' });
      return;
    }
    if (pathOf(request) !== '/sql') {
      rejected++;
      sendJson(response, 404, { message: 'not found: POST /sql, or a WebSocket on /v2' });
      return;
    }
    if (request.method !== 'POST') {
      rejected++;
      sendJson(response, 405, { message: 'method not allowed: use POST' }, { allow: 'POST' });
      return;
    }
    const body = await readBody(request, DEFAULT_MAX_BODY_BYTES);
    if (body === undefined) {
      rejected++;
      sendJson(response, 413, {
        message: `request body is too large (max is ${DEFAULT_MAX_BODY_BYTES} bytes)`,
      });
      return;
    }
    const answer = await sql.handle({ headers: request.headers, body });
    response.writeHead(answer.status, answer.headers);
    response.end(answer.body);
  };

  const server = createServer((request, response) => {
    handleHttp(request, response).catch((error: unknown) => {
      rejected++;
      if (!response.headersSent) sendJson(response, 500, { message: String(error) });
      else response.destroy();
    });
  });

  server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => {}); // a client vanishing mid-handshake is not our problem
    if (!hostHeaderOk(request) || !originOk(request)) {
      rejected++;
      rejectUpgrade(socket, 403, 'Forbidden', 'the Neon proxy only serves loopback hosts and origins');
      return;
    }
    if (!WS_PATHS.has(pathOf(request))) {
      rejected++;
      rejectUpgrade(socket, 404, 'Not Found', 'WebSocket paths: /v2, /v1 or /');
      return;
    }
    // The `?address=host:port` query the driver may add is deliberately ignored.
    pipes.handleUpgrade(request, socket, head);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: options.port ?? 0, host }, () => {
      server.off('error', reject);
      resolve();
    });
  });

  const address = server.address() as AddressInfo;
  // 'localhost' goes through the resolver: make sure it really gave us a loopback address.
  if (!isLoopbackHost(address.address)) {
    await new Promise((resolve) => server.close(resolve));
    throw new Error(`${host} resolved to ${address.address}, which is not a loopback address`);
  }
  const urlHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  let closing: Promise<void> | undefined;
  return {
    port: address.port,
    url: `http://${urlHost}:${address.port}`,
    upstream,
    stats() {
      const http = sql.stats();
      const ws = pipes.stats();
      return {
        openWebSockets: ws.open,
        webSocketsTotal: ws.total,
        httpRequests: http.requests,
        httpQueries: http.queries,
        errors: http.errors + ws.errors + rejected,
      };
    },
    close() {
      closing ??= (async () => {
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        pipes.closeAll();
        server.closeAllConnections();
        await Promise.all([stopped, sql.close()]);
      })();
      return closing;
    },
  };
}
