// Spawns bench/support/bare-hono.ts as its own Node process, with the same Node flags as the real server.
import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { freePort } from '../../test/support/ports.js';
import { repoRoot } from '../../test/support/server.js';
import { pollUntil200 } from './ready.js';

export interface BareServer {
  readonly port: number;
  readonly url: string;
  readonly child: ChildProcess;
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export async function spawnBareHono(): Promise<BareServer> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    ['--enable-source-maps', '--import', 'tsx', resolve(repoRoot, 'bench/support/bare-hono.ts')],
    {
      cwd: repoRoot,
      env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: String(port) },
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
  const server: BareServer = {
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
