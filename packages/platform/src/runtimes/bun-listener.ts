import { DISCARD_MAX_BYTES } from '../http/config.js';
import { descriptorLimit } from '../http/connection-cap.js';
import type { Listen } from '../http/listener.js';

// The slice of Bun's API this file uses, declared here rather than taken from @types/bun: Bun's types
// are global (a `/// <reference types="bun" />` or a tsconfig `types` entry applies them to every
// file), so they would retype fetch, Response, process and WebSocket for the Node and Workers code
// as well, and clash with the Workers types. Shapes as in bun-types 1.4 (serve.d.ts).
interface BunServer {
  /** Undefined only for a unix socket, which we never bind. */
  readonly port: number | undefined;
  /**
   * false: stop accepting, close idle keep-alive sockets, let in-flight requests finish; resolves
   * once every connection is closed. true: also cut in-flight requests at once.
   */
  stop(closeActiveConnections?: boolean): Promise<void>;
  /**
   * Seconds this request's connection may go on before it is closed: Bun's idle timer, which body
   * bytes do not reset (measured on Bun 1.4.5), so a deadline for receiving the body.
   */
  timeout(request: Request, seconds: number): void;
  /** The peer's address (bun-types serve.d.ts); null for a Unix socket. */
  requestIP(request: Request): { address: string } | null;
}
declare const Bun: {
  serve(options: {
    port: number;
    hostname: string;
    /** Seconds a connection may stay without a byte either way (default 10, at most 255). */
    idleTimeout: number;
    fetch(request: Request, server: BunServer): Response | Promise<Response>;
  }): BunServer;
};

// Bun.serve binds synchronously: once it returns the socket is listening (a busy port throws).
export const listenBun: Listen = async (fetch, { port, host, http: limits, defaultHost, log }) => {
  const base = `http://${defaultHost}`;
  const requestTimeoutS = bunSeconds(limits.requestTimeoutMs);
  const server = Bun.serve({
    port,
    hostname: host,
    idleTimeout: Math.ceil(limits.idleTimeoutMs / 1000),
    // Hono's fetch takes (request, env, ctx): hand it the request only, not Bun's server as `env`.
    // Bun hands a request without a Host header (HTTP/1.0) a bare path as its url ("/livez"), on which
    // Hono finds no route: give it an absolute URL on the default host.
    fetch: async (request, server) => {
      // HTTP_REQUEST_TIMEOUT_MS for a body, as Node's requestTimeout (there, a 408; here, a close).
      if (hasBody(request)) server.timeout(request, requestTimeoutS);
      const connection = { remoteAddress: server.requestIP(request)?.address };
      const response = await (request.url.startsWith('/')
        ? fetch(new Request(base + request.url, request), connection)
        : fetch(request, connection));
      // An answer before the body was read (a 413 on its declared size): Bun would close with the rest
      // unread, and the reset can beat the answer to the client. Read and discard it first, up to a
      // bound (node-early-answers.ts does the same on Node, answering first).
      if (hasBody(request) && !request.bodyUsed && request.body)
        await discard(request.body, DISCARD_MAX_BYTES);
      return response;
    },
  });
  // Bun.serve has no header timeout of its own setting (a connection whose headers are not in after
  // about 10 s is closed, whatever we say), no keep-alive timeout but the idle one, and no connection
  // count to cap (docs/http-timeouts.md).
  log.info('http limits', {
    headers_timeout_ms: null,
    request_timeout_ms: requestTimeoutS * 1000,
    idle_timeout_ms: Math.ceil(limits.idleTimeoutMs / 1000) * 1000,
    max_connections: null,
    max_connections_from: 'none',
    descriptor_limit: descriptorLimit() ?? null,
  });
  return {
    port: server.port ?? port,
    close: async (budgetMs) => {
      // When the budget runs out, stop(true) cuts what is left, which also settles the graceful stop.
      const deadline = setTimeout(() => void server.stop(true), budgetMs);
      try {
        await server.stop(false);
      } finally {
        clearTimeout(deadline);
      }
    },
  };
};

/** Bun's timeouts are whole seconds, at most 255. */
const bunSeconds = (ms: number) => Math.min(255, Math.ceil(ms / 1000));

const hasBody = (request: Request) =>
  request.headers.has('content-length') || request.headers.has('transfer-encoding');

/** Reads and drops the stream's bytes, at most `maxBytes`; past them the rest is left to the close. */
async function discard(body: ReadableStream<Uint8Array>, maxBytes: number): Promise<void> {
  const reader = body.getReader();
  let read = 0;
  try {
    while (read <= maxBytes) {
      const { done, value } = await reader.read();
      if (done) return;
      read += value.byteLength;
    }
    await reader.cancel();
  } catch {
    // The client went away: nothing left to read.
  }
}
