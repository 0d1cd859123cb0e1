// A throwaway PgBouncer in front of a harness cluster, run from the system's binary (Debian's
// `pgbouncer` package; `.ci/run` installs it). No npm package ships PgBouncer, so where it is missing
// the tests that need it skip with one line saying what to install (and fail under CI=true).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';
import type { Cluster } from './postgres.js';

export type PoolMode = 'session' | 'transaction';

export interface PgBouncer {
  readonly host: '127.0.0.1';
  readonly port: number;
  readonly mode: PoolMode;
  readonly version: string;
  url(database?: string): string;
  readLog(): string;
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  mode: PoolMode;
  /** Server connections per database/user pair (default_pool_size); default 20, PgBouncer's own. */
  poolSize?: number;
}

const CANDIDATES = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer'];
const INSTALL_HINT =
  "install Debian's pgbouncer package (apt-get install pgbouncer) or put pgbouncer on PATH";
const isRoot = process.getuid?.() === 0;

/**
 * The PgBouncer binary: $PGBOUNCER when set (a path that does not exist means "none", which is how to
 * try the skip), else PATH, then the usual install locations; undefined if none.
 */
export function findPgBouncer(): string | undefined {
  const fromEnv = process.env.PGBOUNCER;
  if (fromEnv) return existsSync(fromEnv) ? fromEnv : undefined;
  try {
    const onPath = execFileSync('sh', ['-c', 'command -v pgbouncer'], { encoding: 'utf8' }).trim();
    if (onPath) return onPath;
  } catch {
    // not on PATH
  }
  return CANDIDATES.find((file) => existsSync(file));
}

/**
 * For `describe.skipIf(...)`: true (and one line on stderr) where PgBouncer is missing. Under CI the
 * component is required: a CI that silently lacks it would hide every pooler test, so this throws.
 */
export function pgBouncerMissing(suite: string): boolean {
  if (findPgBouncer() !== undefined) return false;
  if (process.env.CI === 'true')
    throw new Error(`${suite} need a pgbouncer binary under CI: ${INSTALL_HINT}`);
  console.warn(`skipping ${suite}: no pgbouncer binary; ${INSTALL_HINT}`);
  return true;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

function postgresIds(): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

const accepts = (port: number) =>
  new Promise<boolean>((done) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      done(true);
    });
    socket.once('error', () => done(false));
  });

/** Starts PgBouncer on a free port in `mode`, forwarding every database to `cluster` as `postgres`. */
export async function startPgBouncer(cluster: Cluster, options: PgBouncerOptions): Promise<PgBouncer> {
  const binary = findPgBouncer();
  if (binary === undefined) throw new Error(`no pgbouncer binary: ${INSTALL_HINT}`);
  const version = execFileSync(binary, ['--version'], { encoding: 'utf8' }).split('\n')[0] ?? '';
  const dir = mkdtempSync(join(tmpdir(), 'pgbouncer-harness-'));
  const port = await freePort();
  const ini = join(dir, 'pgbouncer.ini');
  const logFile = join(dir, 'pgbouncer.log');
  writeFileSync(join(dir, 'userlist.txt'), '"postgres" ""\n');
  writeFileSync(
    ini,
    [
      '[databases]',
      `* = host=${cluster.host} port=${cluster.port}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      // No Unix socket: nothing outside the test should find this pooler.
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      `pool_mode = ${options.mode}`,
      `default_pool_size = ${options.poolSize ?? 20}`,
      'max_client_conn = 1000',
      `logfile = ${logFile}`,
      `pidfile = ${join(dir, 'pgbouncer.pid')}`,
      // node-postgres sends none of these, but other clients in a test might.
      'ignore_startup_parameters = extra_float_digits,options',
      '',
    ].join('\n'),
  );
  // PgBouncer refuses to run as root ("PgBouncer should not run as root"): run it as `postgres`.
  const ids = isRoot ? postgresIds() : undefined;
  if (ids)
    for (const file of ['', 'pgbouncer.ini', 'userlist.txt']) chownSync(join(dir, file), ids.uid, ids.gid);
  const child = spawn(binary, [ini], { cwd: '/', stdio: ['ignore', 'pipe', 'pipe'], ...(ids ?? {}) });
  live.add(child);
  let output = '';
  const collect = (chunk: Buffer) => {
    output += chunk.toString();
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  let hasExited = false;
  void exited.then(() => {
    hasExited = true;
    live.delete(child);
  });
  const readLog = () => `${output}${existsSync(logFile) ? readFileSync(logFile, 'utf8') : ''}`;
  const deadline = Date.now() + 10_000;
  while (!(await accepts(port))) {
    if (hasExited || Date.now() > deadline) {
      child.kill('SIGKILL');
      const log = readLog();
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`pgbouncer did not start on ${port}:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    host: '127.0.0.1',
    port,
    mode: options.mode,
    version,
    url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
    readLog,
    async stop() {
      // SIGTERM is PgBouncer's immediate shutdown (SIGINT would wait for clients to leave).
      if (!hasExited) child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 2000);
      await exited;
      clearTimeout(killer);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
