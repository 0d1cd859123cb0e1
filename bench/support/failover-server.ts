// Starts a built server entry (`node <entry>`) as a child process, the way a user runs it, for the
// failover benchmark: the fixed build and the naive scratch build side by side. (test/support/server.ts
// only runs this repository's own dist/node.js.)
import { type ChildProcess, spawn } from 'node:child_process';
import { freePort } from '../../test/support/ports.js';

export interface BenchServer {
  readonly name: string;
  readonly url: string;
  readonly child: ChildProcess;
  /** Parsed JSON log lines. */
  readonly logs: Array<Record<string, unknown>>;
  waitForBoot(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
  dump(): string;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export async function spawnEntry(
  name: string,
  entry: string,
  env: Record<string, string>,
): Promise<BenchServer> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--enable-source-maps', entry], {
    env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  const logs: Array<Record<string, unknown>> = [];
  const other: string[] = [];
  let buffered = '';
  const onData = (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.trim()) continue;
      try {
        logs.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        other.push(line);
      }
    }
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = new Promise<void>((done) =>
    child.on('exit', () => {
      live.delete(child);
      done();
    }),
  );
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  const dump = () => [...logs.map((l) => JSON.stringify(l)), ...other].join('\n').slice(-4000);
  return {
    name,
    url: `http://127.0.0.1:${port}`,
    child,
    logs,
    dump,
    async waitForBoot(timeoutMs = 60_000) {
      const deadline = performance.now() + timeoutMs;
      while (!logs.some((l) => l.msg === 'boot complete')) {
        if (gone) throw new Error(`${name} exited during boot:\n${dump()}`);
        if (performance.now() > deadline)
          throw new Error(`${name} did not boot in ${timeoutMs} ms:\n${dump()}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async stop() {
      if (!gone) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
