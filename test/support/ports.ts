import { createServer } from 'node:net';

/**
 * Asks the kernel for a free TCP port on `host` by binding port 0 and closing again.
 * There is a small race before the caller binds it; with ephemeral ports handed out
 * round-robin that is good enough for tests.
 */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ port: 0, host, exclusive: true }, () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error(`unexpected address for ${host}: ${String(address)}`));
        return;
      }
      server.close((err) => (err ? reject(err) : resolve(address.port)));
    });
  });
}
