import { descriptorLimit } from '../http/connection-cap.js';
import type { FetchHandler, Listen } from '../http/listener.js';

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
}
declare const Bun: {
  serve(options: {
    port: number;
    hostname: string;
    /** Seconds a connection may stay without a byte either way (default 10, at most 255). */
    idleTimeout: number;
    fetch: FetchHandler;
  }): BunServer;
};

// Bun.serve binds synchronously: once it returns the socket is listening (a busy port throws).
export const listenBun: Listen = async (fetch, { port, host, http: limits, defaultHost, log }) => {
  const base = `http://${defaultHost}`;
  const server = Bun.serve({
    port,
    hostname: host,
    idleTimeout: Math.ceil(limits.idleTimeoutMs / 1000),
    // Hono's fetch takes (request, env, ctx): hand it the request only, not Bun's server as `env`.
    // Bun hands a request without a Host header (HTTP/1.0) a bare path as its url ("/livez"), on which
    // Hono finds no route: give it an absolute URL on the default host.
    fetch: (request) =>
      request.url.startsWith('/') ? fetch(new Request(base + request.url, request)) : fetch(request),
  });
  // Bun.serve has no header, request or keep-alive timeout and no connection count to cap: its idle
  // timeout is the only limit (docs/http-timeouts.md).
  log.info('http limits', {
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
