import { createLogger, loadConfig } from '@honest-health/platform';
import { DatabaseHandle, migrate } from '@honest-health/platform/db';
import { WriteProbe } from '@honest-health/platform/internal/db/probe';
import { ReadinessGate } from '@honest-health/platform/internal/http/gate';
import { healthRoutes } from '@honest-health/platform/internal/http/health';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDriver } from '../src/app/databases.js';
import { migrations } from '../src/app/migrations.gen.js';
import { burst } from './support/burst.js';
import { freshDatabase, migratedDatabase } from './support/databases.js';
import { startFaultProxy } from './support/fault-proxy.js';
import { type Cluster, startCluster } from './support/postgres.js';
import { type ServerProcess, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import { until } from './support/until.js';

let cluster: Cluster;
beforeAll(async () => {
  cluster = sharedCluster();
});
afterAll(async () => {
  await cluster?.remove();
});

async function readyz(server: ServerProcess, query = '') {
  const res = await server.get(`/readyz${query}`);
  return {
    status: res.status,
    body: (await res.json()) as { status: string; checks: Record<string, string> },
  };
}

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

describe('readiness', () => {
  it('reports unreachable while the database is down, keeps liveness and recovers without a restart', async () => {
    const own = await startCluster();
    const server = await spawnServer({ env: { DATABASE_URL: own.url(), PROBE_TIMEOUT_MS: '1000' } });
    try {
      await server.waitForReady();
      expect((await readyz(server)).status).toBe(200);

      await own.stop('fast');
      const down = await readyz(server, '?verbose');
      expect(down.status).toBe(503);
      expect(down.body.checks).toEqual({ boot: 'ok', database: 'unreachable' });
      expect(JSON.stringify(down.body)).not.toContain('postgres://');
      for (const path of ['/livez', '/health', '/healthz']) {
        const live = await server.get(path);
        expect(live.status).toBe(200);
        expect(await live.json()).toEqual({ status: 'ok' });
      }

      await own.start();
      const back = await until(
        () => readyz(server),
        (r) => r.status === 200,
      );
      expect(back.body).toEqual({ status: 'ok', checks: { boot: 'ok', database: 'ok' } });
      expect(server.child.exitCode).toBeNull();
    } finally {
      await server.stop();
      await own.remove();
    }
  });

  it('reports read_only on a read-only session, disposes both pools, and recovers', async () => {
    const url = await migratedDatabase(cluster);
    const dbName = new URL(url).pathname.slice(1);
    const server = await spawnServer({ env: { DATABASE_URL: url } });
    try {
      await server.waitForReady();
      expect((await readyz(server)).status).toBe(200);

      // The incident's shape: new sessions come up read-only (25006 on write) while reads still work.
      await cluster.query(`ALTER DATABASE ${dbName} SET default_transaction_read_only = on`);
      await cluster.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE 'honest-health:%'`,
        [dbName],
      );
      const readOnly = await until(
        () => readyz(server, '?verbose'),
        (r) => r.body.checks.database === 'read_only',
      );
      expect(readOnly.status).toBe(503);
      expect(readOnly.body.checks.database).toBe('read_only');
      const disposed = server.logs.filter(
        (l) => l.msg === 'database pool disposed' && l.reason === 'probe read_only',
      );
      expect(disposed.map((l) => l.role).sort()).toEqual(expect.arrayContaining(['app', 'probe']));

      await cluster.query(`ALTER DATABASE ${dbName} RESET default_transaction_read_only`);
      const ok = await until(
        () => readyz(server),
        (r) => r.status === 200,
      );
      expect(ok.body.checks.database).toBe('ok');
    } finally {
      await server.stop();
    }
  });

  it('answers timeout within PROBE_TIMEOUT_MS when traffic is black-holed, then recovers', async () => {
    const url = await migratedDatabase(cluster);
    const proxy = await startFaultProxy(cluster.port);
    const viaProxy = new URL(url);
    viaProxy.port = String(proxy.port);
    const server = await spawnServer({
      env: { DATABASE_URL: viaProxy.toString(), PROBE_TIMEOUT_MS: '1000' },
    });
    try {
      await server.waitForReady();
      expect((await readyz(server)).status).toBe(200);

      proxy.blackhole(true);
      const started = Date.now();
      const hole = await readyz(server);
      const took = Date.now() - started;
      expect(hole.status).toBe(503);
      expect(hole.body.checks.database).toBe('timeout');
      // A bound, not a benchmark: the probe's own timeout plus a margin for a loaded 2-core machine.
      expect(took).toBeLessThan(1000 + 1500);
      expect((await server.get('/livez')).status).toBe(200);

      proxy.blackhole(false);
      const back = await until(
        () => readyz(server),
        (r) => r.status === 200,
      );
      expect(back.body.checks.database).toBe('ok');
    } finally {
      await server.stop();
      await proxy.close();
    }
  });

  it('shares one probe among 200 concurrent readiness checks', async () => {
    const url = await migratedDatabase(cluster);
    const server = await spawnServer({ env: { DATABASE_URL: url } });
    const locker = new pg.Client(url);
    try {
      await server.waitForReady();
      await readyz(server);
      const beats = () =>
        withClient(url, async (c) =>
          Number((await c.query('SELECT sum(beats) AS n FROM health_heartbeat')).rows[0].n),
        );
      const before = await beats();
      // Hold the heartbeat row while the burst lands so every request arrives while a probe is in
      // flight: with a sub-millisecond local database they would otherwise meet a fresh probe each.
      await locker.connect();
      await locker.query('BEGIN');
      await locker.query('SELECT * FROM health_heartbeat FOR UPDATE');
      const answers = burst(server.port, '/readyz', 200);
      await new Promise((r) => setTimeout(r, 500));
      await locker.query('COMMIT');
      const statuses = await answers;
      expect(statuses.filter((s) => s === 200)).toHaveLength(200);
      const probes = (await beats()) - before;
      expect(probes).toBeGreaterThanOrEqual(1);
      expect(probes).toBeLessThanOrEqual(3);
    } finally {
      await locker.end().catch(() => {});
      await server.stop();
    }
  });

  it('answers 200 while every application-pool connection is busy', async () => {
    const url = await freshDatabase(cluster);
    const config = loadConfig({ DATABASE_URL: url, POOL_MAX: '2' });
    const log = createLogger('error', {}, () => {});
    const driver = openDriver(config, log);
    await driver.ready();
    const app = new DatabaseHandle(driver, 'app', log);
    const probeHandle = new DatabaseHandle(driver, 'probe', log);
    try {
      await migrate(app.pool, migrations, log);
      const probe = new WriteProbe({
        probeDatabase: probeHandle,
        appDatabase: app,
        timeoutMs: 2000,
        instanceId: 'busy',
        log,
      });
      const gate = new ReadinessGate();
      gate.open();
      const http = healthRoutes({ gate, writeProbe: () => probe });

      const busy = [app.pool.query('SELECT pg_sleep(3)'), app.pool.query('SELECT pg_sleep(3)')];
      const queued = app.pool.query('SELECT 1');
      await until(
        async () => app.stats(),
        (s) => s.total === 2 && s.idle === 0 && s.waiting === 1,
      );
      expect(app.stats()).toMatchObject({ total: 2, idle: 0, waiting: 1 });

      const res = await http.request('/readyz');
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ status: 'ok', checks: { boot: 'ok', database: 'ok' } });
      await Promise.all([...busy, queued]);
    } finally {
      await Promise.all([app.close(), probeHandle.close()]);
    }
  });

  it('on SIGTERM turns draining at once, finishes the in-flight request and exits 0', async () => {
    const url = await migratedDatabase(cluster);
    const server = await spawnServer({
      env: { DATABASE_URL: url, PROBE_TIMEOUT_MS: '8000', SHUTDOWN_DELAY_MS: '2000' },
    });
    const locker = new pg.Client(url);
    try {
      await server.waitForReady();
      expect((await readyz(server)).status).toBe(200);

      // Hold the heartbeat row so the next probe (and the request waiting on it) is slow.
      await locker.connect();
      await locker.query('BEGIN');
      await locker.query('SELECT * FROM health_heartbeat FOR UPDATE');
      const inFlight = readyz(server);
      await new Promise((r) => setTimeout(r, 300));

      server.kill('SIGTERM');
      await server.waitForLog((l) => l.msg === 'shutdown started');
      const started = Date.now();
      const draining = await readyz(server);
      expect(Date.now() - started).toBeLessThan(1000);
      expect(draining.status).toBe(503);
      expect(draining.body.checks.boot).toBe('draining');
      expect((await server.get('/livez')).status).toBe(200);

      await locker.query('COMMIT');
      const finished = await inFlight;
      expect(finished.status).toBe(200);
      expect(await server.exited).toBe(0);
    } finally {
      await locker.end().catch(() => {});
      server.kill('SIGKILL');
    }
  });
});
