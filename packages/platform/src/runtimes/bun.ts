import { hostname } from 'node:os';
import { compile } from 'zod/mini';
import type { AppEnv, ProcessAppModule } from '../http/module.js';
import { type ProcessOptions, startProcess } from '../lifecycle/process.js';
import { resolveIdentity } from '../util/identity.js';
import { useSchemaCompiler } from '../util/validate.js';
import { listenBun } from './bun-listener.js';

// `bun --hot` (npm run dev:bun) evaluates the entry again, in the same process, on every change; only
// globalThis survives. The previous boot is shut down first (listener, loops, pools): two PGlite
// instances must never open one data directory, and stale loops and signal handlers must not pile up.
// The slot is named for the app (`shop-api` -> `shopApiBun`).
type Instance = { stop(): Promise<void> };
const hot = globalThis as unknown as Record<string, Instance | undefined>;
const slotOf = (name: string) =>
  `${name.replace(/[^a-zA-Z0-9]+(.)?/g, (_, c: string = '') => c.toUpperCase())}Bun`;

/**
 * Runs the app as a Bun process: the process lifecycle with Bun.serve, signals, exit and hot reload
 * (`bun --hot` stops the previous boot before the next starts).
 *
 * @example
 * ```ts
 * import { runOnBun } from '@honest-health/platform/bun';
 * import { pgDatabase } from '@honest-health/platform/drivers/pg';
 *
 * await runOnBun({ ...app, migrations }, { databases: [pgDatabase] });
 * ```
 */
export async function runOnBun<C, E extends AppEnv>(
  module: ProcessAppModule<C, E>,
  options: ProcessOptions,
): Promise<void> {
  // Node and Bun may generate code: a hot path's schema is compiled (util/validate.ts).
  useSchemaCompiler(compile);
  const slot = slotOf(resolveIdentity(module.identity).name);
  await hot[slot]?.stop();

  let reloading = false;
  let shutdown: ((signal: string) => void) | undefined;
  let stopped: () => void = () => {};
  const listeners: [NodeJS.Signals, () => void][] = [];
  hot[slot] = {
    stop: () =>
      new Promise((done) => {
        reloading = true;
        stopped = done;
        for (const [signal, listener] of listeners) process.off(signal, listener);
        if (shutdown) shutdown('hot reload');
        else done();
      }),
  };

  await startProcess(
    module,
    {
      name: 'bun',
      version: process.versions.bun ?? 'unknown',
      env: process.env,
      listen: listenBun,
      instanceId: options.instanceId || hostname(),
      exit: (code) => (reloading ? stopped() : process.exit(code)),
      onSignal: (handler) => {
        shutdown = handler;
        for (const signal of ['SIGTERM', 'SIGINT'] as const) {
          const listener = () => handler(signal);
          process.on(signal, listener);
          listeners.push([signal, listener]);
        }
      },
      whileSignalsKill: async (fn) => {
        for (const [signal, listener] of listeners) process.off(signal, listener);
        try {
          return await fn();
        } finally {
          for (const [signal, listener] of listeners) process.on(signal, listener);
        }
      },
    },
    options,
  );
}
