// Runs a baseline server script from bench/support as its own Node process (through tsx, with the
// same Node flags as the real server) on a free loopback port, and waits until it answers /livez.
import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { freePort } from '../../test/support/ports.js';
import { NODE_FLAGS, repoRoot } from '../../test/support/server.js';
import { pollUntil200 } from './ready.js';

export interface ScriptServer {
  readonly port: number;
  readonly url: string;
  readonly child: ChildProcess;
  stop(): Promise<void>;
}

export interface ScriptServerOptions {
  /** Relative to the repository root, e.g. bench/support/bare-hono.ts. */
  script: string;
  /** On top of PATH, HOST and PORT: nothing else of this process's environment is passed on. */
  env?: Record<string, string>;
  /** Extra Node flags (e.g. --cpu-prof), before the script. */
  nodeArgs?: string[];
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export async function spawnScriptServer(options: ScriptServerOptions): Promise<ScriptServer> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      // Our server's own flags (its semi-space cap included): a baseline with V8's larger default
      // young generation would scavenge half as often and measure the flag, not the code.
      ...NODE_FLAGS,
      ...(options.nodeArgs ?? []),
      '--import',
      'tsx',
      resolve(repoRoot, options.script),
    ],
    {
      cwd: repoRoot,
      env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: String(port), ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  live.add(child);
  let output = '';
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-4000);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<void>((done) =>
    child.once('exit', () => {
      live.delete(child);
      done();
    }),
  );
  const url = `http://127.0.0.1:${port}`;
  const server: ScriptServer = {
    port,
    url,
    child,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
  try {
    await pollUntil200(`${url}/livez`, { timeoutMs: 30_000, exited, describe: () => output });
  } catch (err) {
    await server.stop();
    throw err;
  }
  return server;
}
