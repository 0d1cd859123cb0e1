// The example's server as a child process: its JSON log lines, readiness, requests, and a clean stop.
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';

export interface LogLine {
  level: string;
  msg: string;
  [field: string]: unknown;
}

export interface ServerProcess {
  readonly url: string;
  /** Parsed JSON log lines so far. */
  readonly logs: LogLine[];
  waitForReady(timeoutMs?: number): Promise<void>;
  get(path: string, init?: RequestInit): Promise<Response>;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject()));
    });
  });
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export interface SpawnOptions {
  command: string;
  args: string[];
  cwd: string;
  env?: Record<string, string>;
}

export async function spawnServer(options: SpawnOptions): Promise<ServerProcess> {
  const port = await freePort();
  const child = spawn(options.command, options.args, {
    cwd: options.cwd,
    env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'info', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  const logs: LogLine[] = [];
  const output: string[] = [];
  let buffered = '';
  const onData = (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) {
      try {
        logs.push(JSON.parse(line) as LogLine);
      } catch {
        if (line.trim()) output.push(line);
      }
    }
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((done) =>
    child.on('exit', (code) => {
      exitCode = code;
      live.delete(child);
      done(code);
    }),
  );
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    logs,
    async waitForReady(timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      while (!logs.some((l) => l.msg === 'boot complete')) {
        if (exitCode !== undefined || Date.now() > deadline) {
          const dump = [...logs.map((l) => JSON.stringify(l)), ...output].join('\n');
          throw new Error(`server not ready (exit ${exitCode}); output:\n${dump}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    get: (path, init) => fetch(`${url}${path}`, init),
    async stop() {
      if (exitCode === undefined) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** Polls `fn` until `ok` holds, then returns that value; throws with the last value on time-out. */
export async function until<T>(
  fn: () => Promise<T>,
  ok: (value: T) => boolean,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (ok(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`condition not met in ${timeoutMs} ms: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
