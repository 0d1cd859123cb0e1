// Starting and stopping the servers a benchmark measures, with their boot time.
import { type ServerProcess, type SpawnOptions, spawnServer } from '../../test/support/server.js';
import { forget, track } from './lifecycle.js';
import { pollUntil200 } from './ready.js';
import { progress } from './report.js';

/** The tail of a server's logs and output, for an error message. */
export function serverDump(server: ServerProcess): string {
  return [...server.logs.map((l) => JSON.stringify(l)), ...server.output].join('\n').slice(-4000);
}

const trackName = (port: number) => `server :${port}`;

/**
 * Spawns a server (the Node build unless `command` says otherwise) and times spawn → first /readyz
 * 200, polling every `intervalMs` from the start, the way an orchestrator would see it come up. The
 * server is stopped on the way out unless stopServer() stops it first.
 */
export async function bootToReady(
  options: SpawnOptions,
  intervalMs = 20,
): Promise<{ ms: number; server: ServerProcess }> {
  const started = performance.now();
  const server = await spawnServer(options);
  track(trackName(server.port), () => server.stop());
  try {
    await pollUntil200(`${server.url}/readyz`, {
      intervalMs,
      timeoutMs: 90_000,
      exited: server.exited,
      describe: () => serverDump(server),
    });
  } catch (err) {
    await stopServer(server);
    throw err;
  }
  return { ms: performance.now() - started, server };
}

/** Stops a server (SIGTERM, drain) and says so when it did not exit cleanly. */
export async function stopServer(server: { port: number; stop(): Promise<unknown> }): Promise<void> {
  forget(trackName(server.port));
  const code = await server.stop();
  if (typeof code === 'number' && code !== 0) progress(`server :${server.port} exited with code ${code}`);
}

/** Tracks a server started some other way (e.g. a baseline) under the same name stopServer() uses. */
export function trackServer(server: { port: number; stop(): Promise<unknown> }): void {
  track(trackName(server.port), () => server.stop());
}
