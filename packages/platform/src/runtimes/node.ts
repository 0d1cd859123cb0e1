import { hostname } from 'node:os';
import { compile } from 'zod/mini';
import type { AppEnv, ProcessAppModule } from '../http/module.js';
import { type ProcessOptions, startProcess } from '../lifecycle/process.js';
import { useSchemaCompiler } from '../util/validate.js';
import { listenNode } from './node-listener.js';

const SIGNALS = ['SIGTERM', 'SIGINT'] as const;

/**
 * Runs the app as a Node process: the process lifecycle with Node's listener, signals and exit. Boots
 * in steps (migrations before the port opens), serves, and on SIGTERM drains and exits 0.
 *
 * @example
 * ```ts
 * import { pgDatabase } from '@honest-health/platform/drivers/pg';
 * import { pgliteDatabase } from '@honest-health/platform/drivers/pglite';
 * import { runOnNode } from '@honest-health/platform/node';
 *
 * await runOnNode({ ...app, migrations }, { databases: [pgliteDatabase, pgDatabase] });
 * ```
 */
export async function runOnNode<C, E extends AppEnv>(
  module: ProcessAppModule<C, E>,
  options: ProcessOptions,
): Promise<void> {
  // Node and Bun may generate code: a hot path's schema is compiled (util/validate.ts).
  useSchemaCompiler(compile);
  const listeners: Record<(typeof SIGNALS)[number], () => void> = { SIGTERM: () => {}, SIGINT: () => {} };
  await startProcess(
    module,
    {
      name: 'node',
      version: process.versions.node,
      env: process.env,
      listen: listenNode,
      instanceId: options.instanceId || hostname(),
      exit: (code) => process.exit(code),
      onSignal: (handler) => {
        for (const signal of SIGNALS) {
          listeners[signal] = () => handler(signal);
          process.on(signal, listeners[signal]);
        }
      },
      // With no listener left, Node restores the default action: the signal terminates the process.
      whileSignalsKill: async (fn) => {
        for (const signal of SIGNALS) process.off(signal, listeners[signal]);
        try {
          return await fn();
        } finally {
          for (const signal of SIGNALS) process.on(signal, listeners[signal]);
        }
      },
    },
    options,
  );
}
