// Serves the sandbox on Node. Besides plain serving it honours the 'drop' fault: a response marked
// dropped is never written; the socket is destroyed, so the client sees a network error although the
// operation took effect.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer, type HttpBindings } from '@hono/node-server';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { Hono } from 'hono';
import { createXeroSandbox } from './app.js';
import { isDropped } from './faults.js';
import type { SandboxOptions, SandboxState } from './state.js';
import { type SandboxUrls, sandboxUrls } from './urls.js';

export interface StartXeroSandboxOptions extends SandboxOptions {
  /** 0 (the default) picks a free port. */
  port?: number;
  host?: string;
}

export interface RunningXeroSandbox {
  /** The origin, e.g. http://127.0.0.1:4010 */
  url: string;
  port: number;
  urls: SandboxUrls;
  state: SandboxState;
  app: Hono;
  /** Ends pending hangs, closes idle connections now and cuts the rest shortly after. */
  close(): Promise<void>;
}

export async function startXeroSandbox(options: StartXeroSandboxOptions = {}): Promise<RunningXeroSandbox> {
  const { port = 0, host = '127.0.0.1', ...sandboxOptions } = options;
  const { app, state } = createXeroSandbox(sandboxOptions);
  const server = createAdaptorServer({
    // Left alone, @hono/node-server swaps the global Response for its own, which Bun.serve refuses:
    // development mode on Bun serves the app and this sandbox in one process.
    overrideGlobalObjects: false,
    fetch: async (request, env) => {
      const response = await app.fetch(request, env);
      if (!isDropped(response)) return response;
      await response.body?.cancel();
      (env as HttpBindings).incoming.socket.destroy();
      return RESPONSE_ALREADY_SENT;
    },
  }) as Server;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });

  const actualPort = (server.address() as AddressInfo).port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${actualPort}`;
  let closing: Promise<void> | undefined;
  return {
    url,
    port: actualPort,
    urls: sandboxUrls(url),
    state,
    app,
    close: () => {
      closing ??= new Promise<void>((resolve, reject) => {
        state.close();
        const cut = setTimeout(() => server.closeAllConnections(), 200);
        server.close((error) => {
          clearTimeout(cut);
          if (error) reject(error);
          else resolve();
        });
        server.closeIdleConnections();
      });
      return closing;
    },
  };
}
