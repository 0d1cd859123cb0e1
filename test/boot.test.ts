import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase } from './support/databases.js';
import { startFaultProxy } from './support/fault-proxy.js';
import { expectFirstStartStoppedBySigint } from './support/first-start-signal.js';
import { freePort } from './support/ports.js';
import type { Cluster } from './support/postgres.js';
import { type LogLine, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';

// Keep in step with packages/platform/src/db/migrate.ts: the test holds the same lock to stall a migration.
const MIGRATION_LOCK_KEY = '4875233190112093';

let cluster: Cluster;
beforeAll(async () => {
  cluster = sharedCluster();
});
afterAll(async () => {
  await cluster?.remove();
});

const portAccepts = (port: number) =>
  new Promise<boolean>((done) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      done(true);
    });
    socket.once('error', () => done(false));
  });

const stepOrder = (logs: LogLine[]) => logs.filter((l) => l.msg === 'boot step').map((l) => l.step);

describe('boot contract', () => {
  it('runs the steps in order and binds the port only after migrations', async () => {
    const url = await freshDatabase(cluster);
    const holder = new pg.Client(url);
    await holder.connect();
    await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    const server = await spawnServer({ env: { DATABASE_URL: url } });
    try {
      await server.waitForLog((l) => l.msg === 'boot step' && l.step === 'open pool');
      // The migration waits on our lock: the listener must not be bound yet.
      await new Promise((r) => setTimeout(r, 500));
      expect(await portAccepts(server.port)).toBe(false);
      expect(stepOrder(server.logs)).not.toContain('migrate');

      await holder.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
      await server.waitForReady();
      expect(stepOrder(server.logs)).toEqual([
        'telemetry',
        'logging',
        'error tracking',
        'open pool',
        'migrate',
        'load api-key registry',
        'bind listener',
        'start loops',
        'open gate',
      ]);
      const res = await server.get('/readyz');
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ status: 'ok', checks: { boot: 'ok', database: 'ok' } });
      // The first line names the runtime: the one that runs the tests, since spawnServer uses it.
      expect(server.logs[0]).toMatchObject({
        msg: 'starting',
        runtime: 'node',
        version: process.versions.node,
      });
      expect(await server.stop()).toBe(0);
    } finally {
      await holder.end();
      server.kill('SIGKILL');
    }
  });

  it('exits 1 naming the step when the database is unreachable, never binding the port', async () => {
    const deadPort = await freePort();
    const server = await spawnServer({
      env: { DATABASE_URL: `postgres://postgres@127.0.0.1:${deadPort}/x` },
    });
    expect(await server.exited).toBe(1);
    const failure = server.logs.find((l) => l.level === 'error');
    expect(failure?.msg).toMatch(/boot failed at step "open pool": ECONNREFUSED/);
    expect(server.logs.some((l) => l.msg === 'listening')).toBe(false);
  });

  it('bounds an unanswered database by PROBE_TIMEOUT_MS', async () => {
    const proxy = await startFaultProxy(cluster.port);
    proxy.blackhole(true);
    const started = Date.now();
    const server = await spawnServer({
      env: { DATABASE_URL: `postgres://postgres@127.0.0.1:${proxy.port}/postgres`, PROBE_TIMEOUT_MS: '800' },
    });
    try {
      expect(await server.exited).toBe(1);
      // Bounded by the probe timeout (800 ms) plus process start-up, not by TCP's own timeouts (a SYN
      // into a black hole is retried for over a minute). The margin is wide: start-up alone takes
      // seconds on a loaded 2-core machine.
      expect(Date.now() - started).toBeLessThan(15_000);
      const failure = server.logs.find((l) => l.level === 'error');
      expect(failure?.msg).toMatch(/boot failed at step "open pool": database ping took longer than 800 ms/);
      expect(await portAccepts(server.port)).toBe(false);
    } finally {
      await proxy.close();
    }
  });

  it('exits 1 when a migration cannot be applied', async () => {
    const url = await freshDatabase(cluster);
    const db = new pg.Client(url);
    await db.connect();
    // A conflicting table makes the first migration's CREATE TABLE fail, as a broken migration would.
    await db.query('CREATE TABLE organizations (id int)');
    await db.end();
    const server = await spawnServer({ env: { DATABASE_URL: url } });
    expect(await server.exited).toBe(1);
    const failure = server.logs.find((l) => l.level === 'error');
    expect(failure?.msg).toMatch(/boot failed at step "migrate": 42P07/);
    expect(server.logs.some((l) => l.msg === 'listening')).toBe(false);
    // Nothing half-applied: the migration ran in one transaction.
    const check = await cluster.query(
      `SELECT to_regclass('health_heartbeat') IS NULL AS absent FROM pg_database WHERE datname = current_database()`,
    );
    expect(check.rows[0]?.absent).toBe(true);
  });

  it('exits 1 with one log line when the app cannot be built (its development key is unreadable)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'boot-app-'));
    try {
      // A directory where the embedded database's token key file belongs: reading and writing it fail.
      mkdirSync(join(dir, '.data', 'token-encryption-key'), { recursive: true });
      const server = await spawnServer({
        cwd: dir,
        env: { DATABASE_URL: '', TOKEN_ENCRYPTION_KEY: undefined },
      });
      expect(await server.exited).toBe(1);
      const failure = server.logs.find((l) => l.level === 'error');
      expect(failure?.msg).toBe('boot failed building the app');
      expect(server.logs.some((l) => l.msg === 'boot step')).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exits 1 when the API-key registry cannot be read', async () => {
    const url = await freshDatabase(cluster);
    const first = await spawnServer({ env: { DATABASE_URL: url } });
    await first.waitForReady();
    expect(await first.stop()).toBe(0);

    // A role that can do everything the boot needs except read the organizations table.
    const role = `app_${Date.now()}`;
    const admin = new pg.Client(url);
    await admin.connect();
    await admin.query(`CREATE ROLE ${role} LOGIN`);
    await admin.query(`GRANT USAGE ON SCHEMA drizzle TO ${role}`);
    await admin.query(
      `GRANT SELECT ON drizzle.__drizzle_migrations, drizzle.__drizzle_migrations_platform TO ${role}`,
    );
    await admin.query(`GRANT SELECT, INSERT, UPDATE ON health_heartbeat TO ${role}`);
    await admin.end();

    const roleUrl = new URL(url);
    roleUrl.username = role;
    const server = await spawnServer({ env: { DATABASE_URL: roleUrl.toString() } });
    expect(await server.exited).toBe(1);
    const failure = server.logs.find((l) => l.level === 'error');
    expect(failure?.msg).toMatch(/boot failed at step "load api-key registry": 42501/);
    expect(server.logs.some((l) => l.msg === 'listening')).toBe(false);
  });

  it('treats a malformed SENTRY_DSN as advisory: warns and serves', async () => {
    const url = await freshDatabase(cluster);
    const dsn = 'not a dsn, but secret-looking s3cr3t';
    const server = await spawnServer({ env: { DATABASE_URL: url, SENTRY_DSN: dsn } });
    try {
      await server.waitForReady();
      const warning = server.logs.find((l) => l.level === 'warn' && l.step === 'error tracking');
      expect(warning).toMatchObject({
        msg: 'boot step failed (advisory, continuing)',
        err: expect.objectContaining({ message: expect.any(String) }),
      });
      expect(JSON.stringify(server.logs)).not.toContain('s3cr3t');
      expect((await server.get('/readyz')).status).toBe(200);
    } finally {
      await server.stop();
    }
  });

  it('boots three replicas at once against one empty database, applying each migration once', async () => {
    const url = await freshDatabase(cluster);
    const servers = await Promise.all([1, 2, 3].map(() => spawnServer({ env: { DATABASE_URL: url } })));
    try {
      await Promise.all(servers.map((s) => s.waitForReady()));
      for (const s of servers) expect((await s.get('/readyz')).status).toBe(200);
      // Each migration takes the lock on its own, so replicas may share the work: each applies once.
      const applied = servers.flatMap((s) =>
        s.logs.filter((l) => l.msg === 'migration applied').map((l) => l.migration),
      );
      expect(applied).toHaveLength(new Set(applied).size);
      const db = new pg.Client(url);
      await db.connect();
      const { rows } = await db.query(
        'SELECT hash, count(*)::int AS n FROM drizzle.__drizzle_migrations GROUP BY hash',
      );
      await db.end();
      const { migrations } = await import('../src/app/migrations.gen.js');
      expect(rows).toHaveLength(migrations.length);
      expect(rows.every((r) => r.n === 1)).toBe(true);
    } finally {
      await Promise.all(servers.map((s) => s.stop()));
    }
  });

  it('logs who holds the migration lock while it waits, and fails hard past MIGRATION_LOCK_TIMEOUT_MS', async () => {
    const url = await freshDatabase(cluster);
    const holder = new pg.Client({ connectionString: url, application_name: 'lock-holder-test' });
    await holder.connect();
    const holderPid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
    await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    const server = await spawnServer({ env: { DATABASE_URL: url, MIGRATION_LOCK_TIMEOUT_MS: '1500' } });
    try {
      const waiting = await server.waitForLog((l) => l.msg === 'waiting for the migration lock');
      expect(waiting).toMatchObject({
        level: 'warn',
        holder_pid: holderPid,
        holder_application_name: 'lock-holder-test',
        timeout_ms: 1500,
      });
      expect(await server.exited).toBe(1);
      const failure = server.logs.find((l) => l.level === 'error');
      expect(failure?.msg).toBe(
        `boot failed at step "migrate": the migration lock is still held by pid ${holderPid} ` +
          '(application_name "lock-holder-test") after 1500 ms (MIGRATION_LOCK_TIMEOUT_MS)',
      );
      expect(server.logs.some((l) => l.msg === 'listening')).toBe(false);
      // The holder never noticed: its lock is intact.
      const held = await cluster.query<{ n: string }>(
        "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = $1 AND granted",
        [holderPid],
      );
      expect(Number(held.rows[0]?.n)).toBe(1);
    } finally {
      await holder.end();
      server.kill('SIGKILL');
    }
  });

  it('boots when the pooler check itself fails, assuming a transaction pooler (no named statements)', async () => {
    const url = await freshDatabase(cluster);
    // Two connections for the role: the ping's client holds one, so a client of the check is refused.
    // Not one: a CONCURRENTLY migration (0015) holds the migration lock on a second connection.
    const role = `single_${Date.now()}`;
    await cluster.query(`CREATE ROLE ${role} LOGIN CONNECTION LIMIT 2`);
    await cluster.query(`ALTER DATABASE ${new URL(url).pathname.slice(1)} OWNER TO ${role}`);
    const roleUrl = new URL(url);
    roleUrl.username = role;
    const server = await spawnServer({ env: { DATABASE_URL: roleUrl.toString(), POOL_MAX: '2' } });
    try {
      await server.waitForReady();
      expect(
        server.logs.find((l) => l.msg === 'could not check for a transaction pooler; assuming one'),
      ).toBeDefined();
      expect(server.logs.find((l) => l.msg === 'database pooler')).toMatchObject({
        mode: 'transaction',
        source: 'assumed',
        named_statements: false,
      });
    } finally {
      await server.stop();
    }
  });

  for (const [signal, code] of [
    ['SIGTERM', 143],
    ['SIGINT', 130],
  ] as const) {
    it(`stops a boot waiting on the migration lock at once on ${signal}, exiting ${code}`, async () => {
      const url = await freshDatabase(cluster);
      const holder = new pg.Client(url);
      await holder.connect();
      await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      const server = await spawnServer({ env: { DATABASE_URL: url } });
      try {
        await server.waitForLog((l) => l.msg === 'waiting for the migration lock');
        const sent = Date.now();
        server.kill(signal);
        expect(await server.exited).toBe(code);
        // Not the 25 s drain budget: the wait is abandoned within a poll.
        expect(Date.now() - sent).toBeLessThan(3000);
        expect(
          server.logs.find((l) => l.msg === 'signal during boot: stopping without serving'),
        ).toMatchObject({
          signal,
          step: 'migrate',
          exit_code: code,
        });
        expect(server.logs.some((l) => l.msg === 'listening' || l.msg === 'shutdown started')).toBe(false);
        // Its transaction is gone with it: nothing of the server is left on the database.
        const left = await cluster.query<{ n: string }>(
          "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name LIKE 'honest-health:%' AND datname = $1",
          [new URL(url).pathname.slice(1)],
        );
        expect(Number(left.rows[0]?.n)).toBe(0);
      } finally {
        await holder.end();
        server.kill('SIGKILL');
      }
    });
  }

  it("stops the embedded database's first start at once on SIGINT", async () => {
    await expectFirstStartStoppedBySigint(await spawnServer({ env: { DATABASE_URL: 'memory://' } }));
  });
});
