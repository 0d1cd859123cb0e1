import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { connectionCap, descriptorLimit } from '../http/connection-cap.js';
import type { Listen } from '../http/listener.js';
import { guardConnections } from '../http/node-connections.js';
import { drainEarlyAnswers } from '../http/node-early-answers.js';

export const listenNode: Listen = (fetch, { port, host, http: limits, defaultHost, log }) =>
  new Promise((resolve, reject) => {
    const server = createAdaptorServer({
      // @hono/node-server passes { incoming, outgoing } as the env: only the peer's address goes on.
      fetch: (request, env) => fetch(request, { remoteAddress: env.incoming.socket.remoteAddress }),
      // The Host for a request that has none (HTTP/1.0, as HAProxy's default httpchk sends). Without it
      // @hono/node-server answers 400: `const host = incoming.headers.host || defaultHostname;
      // if (!host) throw new RequestError("Missing host header")` (src/request.ts).
      hostname: defaultHost,
      // Its clean-up destroys the socket 500 ms after an early answer; drainEarlyAnswers reads the rest.
      autoCleanupIncoming: false,
      serverOptions: {
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: limits.requestTimeoutMs,
        keepAliveTimeout: limits.keepAliveTimeoutMs,
        // Node checks the two timeouts above on this interval (30 s by default), so a silent socket
        // would live up to headersTimeout + 30 s.
        connectionsCheckingInterval: Math.min(1000, limits.headersTimeoutMs),
      },
    }) as import('node:http').Server;
    drainEarlyAnswers(server);
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const cap = connectionCap(limits.maxConnections, descriptorLimit());
      guardConnections(server, { max: cap.max, idleTimeoutMs: limits.idleTimeoutMs, log });
      log.info('http limits', {
        headers_timeout_ms: limits.headersTimeoutMs,
        request_timeout_ms: limits.requestTimeoutMs,
        keep_alive_timeout_ms: limits.keepAliveTimeoutMs,
        idle_timeout_ms: limits.idleTimeoutMs,
        max_connections: cap.max ?? null,
        max_connections_from: cap.source,
        descriptor_limit: cap.descriptorLimit ?? null,
      });
      resolve({
        port: (server.address() as AddressInfo).port,
        close: (budgetMs) =>
          new Promise<void>((done) => {
            // Node's close() waits for keep-alive sockets to go away: close the idle ones now and
            // again as in-flight requests finish, and cut whatever is left when the budget runs out.
            const sweep = setInterval(() => server.closeIdleConnections(), 50);
            const deadline = setTimeout(() => server.closeAllConnections(), budgetMs);
            server.close(() => {
              clearInterval(sweep);
              clearTimeout(deadline);
              done();
            });
            server.closeIdleConnections();
          }),
      });
    });
  });
