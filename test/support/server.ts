// Runs the built server (`node dist/node.js`) as a child process, the way a user starts it.
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { freePort } from './ports.js';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const serverEntry = resolve(repoRoot, 'dist/node.js');
/** Node's flags in the Dockerfile's CMD (test/fast/deploy-config.test.ts holds them equal). */
export const NODE_FLAGS = ['--enable-source-maps', '--max-semi-space-size=16'];
/**
 * What package.json's `start` and its tsx scripts on the embedded database add to Node's flags
 * (test/fast/deploy-config.test.ts holds them equal): no tier-up, so PGlite's wasm stays on V8's
 * baseline compiler (Liftoff). PGlite is a large wasm module, and the optimizing tier's background
 * compiles cost more CPU than they save in a process that initdb's, migrates or serves one developer
 * (docs/development.md).
 */
export const EMBEDDED_NODE_FLAGS = ['--no-wasm-tier-up', '--no-wasm-dynamic-tiering'];
/** `npm start`'s entry (after the build): development mode when nothing is configured, else dist/node.js. */
export const startEntry = resolve(repoRoot, 'dev/start.ts');
export const tsx = resolve(repoRoot, 'node_modules/.bin/tsx');
/**
 * tsx's arguments to run a TypeScript file of this repository from any cwd: the repository's tsconfig,
 * whose paths resolve the platform to its sources.
 */
export const tsxArgs = (file: string, ...args: string[]) => [
  ...EMBEDDED_NODE_FLAGS,
  '--tsconfig',
  resolve(repoRoot, 'tsconfig.json'),
  file,
  ...args,
];
/** A fixed key for tests only: 32 bytes, base64. */
export const TEST_TOKEN_KEY = Buffer.alloc(32, 7).toString('base64');

/** Per-key rate and per-organization quota far above what any test sends. */
export const TEST_LIMITS = {
  API_RATE_PER_MINUTE: '6000000',
  API_RATE_BURST: '100000',
  ORG_MAX_PENDING_INVOICES: '100000000',
};

export interface LogLine {
  level: string;
  msg: string;
  [field: string]: unknown;
}

export interface ServerProcess {
  readonly port: number;
  readonly url: string;
  readonly child: ChildProcess;
  /** Parsed JSON log lines so far; anything on stdout that is not JSON is kept in `output`. */
  readonly logs: LogLine[];
  readonly output: string[];
  /** Resolves with the exit code (or 128 + signal number style string) once the process ends. */
  readonly exited: Promise<number | null>;
  waitForLog(predicate: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  waitForReady(timeoutMs?: number): Promise<void>;
  get(path: string, init?: RequestInit): Promise<Response>;
  kill(signal?: NodeJS.Signals): void;
  stop(): Promise<number | null>;
}

export interface SpawnOptions {
  env?: Record<string, string | undefined>;
  cwd?: string;
  port?: number;
  /** The program to run instead of `node --enable-source-maps dist/node.js`, e.g. the Bun entry. */
  command?: string;
  args?: string[];
  /**
   * false keeps this server's output out of the run's secret scan: only for a server that prints a
   * secret by design (development mode shows its organization's API key once).
   */
  scanned?: boolean;
}

/** Set by global-setup.ts for the whole run (forked test workers inherit it). */
export const SERVER_LOG_ENV = 'HONEST_HEALTH_TEST_SERVER_LOG';
const serverLog = process.env[SERVER_LOG_ENV];

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/**
 * What `npm start` runs after its build: dev/start.ts with tsx's loader in the same process (so signals
 * and the exit code are the server's own), from any cwd with the repository's tsconfig.
 */
export function spawnStart(options: Omit<SpawnOptions, 'command' | 'args'> = {}): Promise<ServerProcess> {
  const loader = pathToFileURL(resolve(repoRoot, 'node_modules/tsx/dist/loader.mjs')).href;
  return spawnServer({
    ...options,
    env: { TSX_TSCONFIG_PATH: resolve(repoRoot, 'tsconfig.json'), ...options.env },
    command: process.execPath,
    args: [...NODE_FLAGS, ...EMBEDDED_NODE_FLAGS, '--import', loader, startEntry],
  });
}

export async function spawnServer(options: SpawnOptions = {}): Promise<ServerProcess> {
  const port = options.port ?? (await freePort());
  const command = options.command ?? process.execPath;
  const args = options.command ? (options.args ?? []) : [...NODE_FLAGS, serverEntry];
  const child = spawn(command, args, {
    cwd: options.cwd ?? repoRoot,
    env: {
      PATH: process.env.PATH,
      // The run's temp dir (test/support/temp-root.ts): what the server leaves there fails the run.
      TMPDIR: process.env.TMPDIR,
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'info',
      TOKEN_ENCRYPTION_KEY: TEST_TOKEN_KEY,
      // Tests and benchmarks send hundreds of requests a second on one key; the limiter stays on the
      // path, above their load (test/fast/limits.test.ts tests the limiter and the defaults).
      ...TEST_LIMITS,
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  const logs: LogLine[] = [];
  const output: string[] = [];
  const waiters = new Set<() => void>();
  const onLine = (line: string) => {
    if (!line.trim()) return;
    // Every server a test run spawns also writes here; global-setup.ts scans it for secrets at the end.
    if (serverLog && options.scanned !== false) appendFileSync(serverLog, `${line}\n`);
    try {
      logs.push(JSON.parse(line) as LogLine);
    } catch {
      output.push(line);
    }
    for (const wake of waiters) wake();
  };
  let buffered = '';
  const onData = (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    lines.forEach(onLine);
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  // Set before the waiters wake, so a waitForLog woken by the exit sees it and fails at once.
  let hasExited = false;
  const exited = new Promise<number | null>((done) =>
    child.on('exit', (code) => {
      hasExited = true;
      live.delete(child);
      if (buffered) onLine(buffered);
      for (const wake of waiters) wake();
      done(code);
    }),
  );

  const url = `http://127.0.0.1:${port}`;
  const server: ServerProcess = {
    port,
    url,
    child,
    logs,
    output,
    exited,
    waitForLog(predicate, timeoutMs = 30_000) {
      return new Promise((done, fail) => {
        const check = () => {
          const hit = logs.find(predicate);
          if (hit) return finish(() => done(hit));
          if (hasExited)
            return finish(() => fail(new Error(`server exited before the log line; logs:\n${dump()}`)));
        };
        const timer = setTimeout(
          () => finish(() => fail(new Error(`log line not seen in time; logs:\n${dump()}`))),
          timeoutMs,
        );
        const finish = (settle: () => void) => {
          clearTimeout(timer);
          waiters.delete(check);
          settle();
        };
        waiters.add(check);
        check();
      });
    },
    async waitForReady(timeoutMs = 60_000) {
      await server.waitForLog((l) => l.msg === 'boot complete', timeoutMs);
    },
    get: (path, init) => fetch(`${url}${path}`, init),
    kill: (signal = 'SIGTERM') => void child.kill(signal),
    async stop() {
      if (!hasExited) child.kill('SIGTERM');
      return exited;
    },
  };
  const dump = () => [...logs.map((l) => JSON.stringify(l)), ...output].join('\n');
  return server;
}
