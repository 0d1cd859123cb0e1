import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import type { Listen } from '../app/server.js';

export const listenNode: Listen = (fetch, port, host) =>
  new Promise((resolve, reject) => {
    const server = createAdaptorServer({ fetch });
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve({
        port: (server.address() as AddressInfo).port,
        close: (budgetMs) =>
          new Promise<void>((done) => {
            // Node's close() waits for keep-alive sockets to go away: close the idle ones now and
            // again as in-flight requests finish, and cut whatever is left when the budget runs out.
            const http = server as import('node:http').Server;
            const sweep = setInterval(() => http.closeIdleConnections(), 50);
            const deadline = setTimeout(() => http.closeAllConnections(), budgetMs);
            server.close(() => {
              clearInterval(sweep);
              clearTimeout(deadline);
              done();
            });
            http.closeIdleConnections();
          }),
      });
    });
  });
