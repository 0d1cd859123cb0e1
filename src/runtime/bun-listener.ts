import type { FetchHandler, Listen } from '../app/server.js';

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
  serve(options: { port: number; hostname: string; fetch: FetchHandler }): BunServer;
};

// Bun.serve binds synchronously: once it returns the socket is listening (a busy port throws).
export const listenBun: Listen = async (fetch, port, host) => {
  // Hono's fetch takes (request, env, ctx): hand it the request only, not Bun's server as `env`.
  const server = Bun.serve({ port, hostname: host, fetch: (request) => fetch(request) });
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
