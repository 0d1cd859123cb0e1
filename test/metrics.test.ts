import { spawnSync } from 'node:child_process';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { migratedDatabase } from './support/databases.js';
import { createOrg, waitForKey } from './support/orgs.js';
import type { Cluster } from './support/postgres.js';
import { parsePrometheus, sample } from './support/prometheus.js';
import { type ServerProcess, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import type { Sandbox } from './support/ticks.js';
import { sandboxEnv } from './support/ticks.js';
import { until } from './support/until.js';

let cluster: Cluster;
let sandbox: Sandbox;
beforeAll(async () => {
  [cluster, sandbox] = await Promise.all([sharedCluster(), startXeroSandbox({ port: 0 })]);
});
afterAll(async () => {
  await sandbox?.close();
  await cluster?.remove();
});

const TOKEN = 'metrics-test-token-0c1d';

async function scrape(server: ServerProcess) {
  const res = await server.get('/metrics', { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parsePrometheus(await res.text());
}

async function readyz(server: ServerProcess) {
  const res = await server.get('/readyz');
  return { status: res.status, body: (await res.json()) as { checks: Record<string, string> } };
}

describe('GET /metrics', () => {
  it('parses as Prometheus text and counts a read-only episode under its cause', async () => {
    const url = await migratedDatabase(cluster);
    const dbName = new URL(url).pathname.slice(1);
    const server = await spawnServer({
      env: {
        DATABASE_URL: url,
        METRICS_TOKEN: TOKEN,
        TICK_INTERVAL_MS: '300',
        ...sandboxEnv(sandbox),
      },
    });
    try {
      await server.waitForReady();
      expect((await server.get('/metrics')).status).toBe(401);
      expect((await server.get('/metrics', { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
      expect((await readyz(server)).status).toBe(200);

      const before = await scrape(server);
      for (const status of ['queued', 'pushed', 'failed', 'dead', 'awaiting_connection']) {
        expect(sample(before, 'honest_health_queue_depth', { status })).toBe(0);
      }
      expect(
        sample(before, 'honest_health_db_pool_disposals_total', { pool: 'app', cause: 'probe_read_only' }),
      ).toBe(0);
      expect(
        sample(before, 'honest_health_readiness_probes_total', { outcome: 'ok' }),
      ).toBeGreaterThanOrEqual(1);
      expect(sample(before, 'honest_health_database_status', { status: 'ok' })).toBe(1);
      expect(sample(before, 'honest_health_db_pool_size', { pool: 'app' })).toBeGreaterThanOrEqual(1);
      // The HTTP status is `code`, as in Prometheus' own HTTP metrics.
      expect(sample(before, 'honest_health_http_requests_total', { route: '/readyz', code: '200' })).toBe(1);
      expect(
        before
          .find((f) => f.name === 'honest_health_http_requests_total')
          ?.metrics.some((m) => 'status' in (m.labels ?? {})),
      ).toBe(false);
      expect(sample(before, 'honest_health_token_refreshes_total', { outcome: 'refreshed' })).toBe(0);
      expect(before.find((f) => f.name === 'process_cpu_seconds_total')?.type).toBe('COUNTER');
      await until(
        async () =>
          sample(await scrape(server), 'honest_health_tick_runs_total', {
            tick: 'push-invoices',
            outcome: 'ok',
          }),
        (n) => (n ?? 0) >= 1,
      );

      // The incident's shape: sessions come up read-only while reads still work.
      await cluster.query(`ALTER DATABASE ${dbName} SET default_transaction_read_only = on`);
      await cluster.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE 'honest-health:%'`,
        [dbName],
      );
      await until(
        () => readyz(server),
        (r) => r.body.checks.database === 'read_only',
      );
      const during = await scrape(server);
      // Each pool is thrown away at least once, by whoever met the read-only node first (a tick or the
      // probe); the probe's own pool by the probe. Later disposals of the fresh pools are damped.
      const disposals = (pool: string) =>
        (during.find((f) => f.name === 'honest_health_db_pool_disposals_total')?.metrics ?? [])
          .filter((m) => m.labels?.pool === pool)
          .reduce((n, m) => n + Number(m.value), 0);
      expect(disposals('app')).toBeGreaterThanOrEqual(1);
      expect(
        sample(during, 'honest_health_db_pool_disposals_total', { pool: 'probe', cause: 'probe_read_only' }),
      ).toBeGreaterThanOrEqual(1);
      expect(
        sample(during, 'honest_health_readiness_probes_total', { outcome: 'read_only' }),
      ).toBeGreaterThanOrEqual(1);
      expect(sample(during, 'honest_health_database_status', { status: 'read_only' })).toBe(1);
      expect(
        sample(during, 'honest_health_http_requests_total', { route: '/readyz', code: '503' }),
      ).toBeGreaterThanOrEqual(1);

      await cluster.query(`ALTER DATABASE ${dbName} RESET default_transaction_read_only`);
      await until(
        () => readyz(server),
        (r) => r.status === 200,
      );
      const after = await scrape(server);
      expect(sample(after, 'honest_health_database_status', { status: 'ok' })).toBe(1);
      // The token never appears in the exposition, whatever it counts.
      const text = await (
        await server.get('/metrics', { headers: { authorization: `Bearer ${TOKEN}` } })
      ).text();
      expect(text).not.toContain(TOKEN);
      expect(text).not.toContain('sandbox-secret');
    } finally {
      await server.stop();
    }
  });

  it('shows callers waiting for the pool while /readyz stays 200, and counts connections retired at max lifetime', async () => {
    const url = await migratedDatabase(cluster);
    const server = await spawnServer({
      env: {
        DATABASE_URL: url,
        METRICS_TOKEN: TOKEN,
        POOL_MAX: '2',
        POOL_MAX_LIFETIME_S: '1',
        API_KEY_REFRESH_MS: '200',
      },
    });
    const locker = new pg.Client(url);
    try {
      await server.waitForReady();
      const org = await createOrg(url, 'Busy Ltd');
      await waitForKey(server, org.apiKey);

      // Every app-pool connection blocks on the lock; the requests after them queue for a connection.
      await locker.connect();
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE xero_connections IN ACCESS EXCLUSIVE MODE');
      const blocked = Array.from({ length: 4 }, () =>
        server.get('/api/connections', { headers: { authorization: `Bearer ${org.apiKey}` } }),
      );
      const busy = await until(
        () => scrape(server),
        (m) =>
          (sample(m, 'honest_health_db_pool_waiting', { pool: 'app' }) ?? 0) > 0 &&
          sample(m, 'honest_health_db_pool_in_use', { pool: 'app' }) === 2,
      );
      expect(sample(busy, 'honest_health_db_pool_idle', { pool: 'app' })).toBe(0);
      expect(sample(busy, 'honest_health_db_pool_size', { pool: 'app' })).toBe(2);
      const ready = await readyz(server);
      expect(ready.status).toBe(200);
      expect(ready.body.checks.database).toBe('ok');

      await locker.query('COMMIT');
      const answers = await Promise.all(blocked);
      expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200]);

      // Connections older than POOL_MAX_LIFETIME_S are retired, and counted on their own: single
      // connections, not whole pools (honest_health_db_pool_disposals_total stays 0).
      const retired = await until(
        () => scrape(server),
        (m) => (sample(m, 'honest_health_db_connections_retired_total', { pool: 'app' }) ?? 0) >= 1,
      );
      expect(
        sample(retired, 'honest_health_db_pool_disposals_total', { cause: 'max_lifetime' }),
      ).toBeUndefined();
      const pools = retired.find((f) => f.name === 'honest_health_db_pool_disposals_total')?.metrics ?? [];
      expect(pools.length).toBeGreaterThan(0);
      expect(pools.map((m) => Number(m.value))).toEqual(pools.map(() => 0));
    } finally {
      await locker.end().catch(() => {});
      await server.stop();
    }
  });
});

// Prometheus' own linter, from Debian's `prometheus` package: run when it is installed, and always
// under CI (which installs it), where a missing one fails rather than hides the lint.
const promtool = spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;

describe('promtool', () => {
  it.skipIf(!promtool && process.env.CI !== 'true')(
    'finds nothing to lint in our metrics (needs promtool: apt-get install prometheus)',
    async () => {
      expect(promtool, 'promtool is missing: apt-get install prometheus').toBe(true);
      const url = await migratedDatabase(cluster);
      const server = await spawnServer({ env: { DATABASE_URL: url, METRICS_TOKEN: TOKEN } });
      try {
        await server.waitForReady();
        expect((await readyz(server)).status).toBe(200);
        expect((await server.get('/api/invoices')).status).toBe(401);
        const res = await server.get('/metrics', { headers: { authorization: `Bearer ${TOKEN}` } });
        const text = await res.text();
        // Ours only: prom-client's default process metrics are prom-client's business.
        const ours = text
          .split('\n')
          .filter((l) => /^(# (HELP|TYPE) )?honest_health_/.test(l))
          .join('\n');
        expect(ours).toContain('honest_health_db_connections_retired_total');
        const lint = spawnSync('promtool', ['check', 'metrics'], { input: `${ours}\n`, encoding: 'utf8' });
        expect({ status: lint.status, out: `${lint.stdout}${lint.stderr}`.trim() }).toEqual({
          status: 0,
          out: '',
        });
      } finally {
        await server.stop();
      }
    },
  );
});

describe('a scrape-only setup', () => {
  it('sees an outage without anyone calling /readyz: each scrape gets a probe at most 1 s old', async () => {
    const url = await migratedDatabase(cluster);
    const dbName = new URL(url).pathname.slice(1);
    const server = await spawnServer({ env: { DATABASE_URL: url, METRICS_TOKEN: TOKEN } });
    try {
      await server.waitForReady();
      const first = await scrape(server);
      expect(sample(first, 'honest_health_database_status', { status: 'ok' })).toBe(1);

      await cluster.query(`ALTER DATABASE ${dbName} SET default_transaction_read_only = on`);
      await cluster.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE 'honest-health:%'`,
        [dbName],
      );
      // Scrapes only, a second apart, as Prometheus would (faster than its 15 s default).
      const during = await until(
        () => scrape(server),
        (m) => sample(m, 'honest_health_database_status', { status: 'read_only' }) === 1,
        8000,
        1000,
      );
      expect(sample(during, 'honest_health_database_status', { status: 'ok' })).toBe(0);
      // Counters are read before the gauges' probe settles: the scrape after counts it.
      expect(
        sample(await scrape(server), 'honest_health_readiness_probes_total', { outcome: 'read_only' }),
      ).toBeGreaterThanOrEqual(1);
      expect(sample(during, 'honest_health_http_requests_total', { route: '/readyz' })).toBeUndefined();

      await cluster.query(`ALTER DATABASE ${dbName} RESET default_transaction_read_only`);
      const back = await until(
        () => scrape(server),
        (m) => sample(m, 'honest_health_database_status', { status: 'ok' }) === 1,
        8000,
        1000,
      );
      // And the age of the result each scrape reports, for setups that want to alert on it.
      for (const m of [first, during, back]) {
        expect(sample(m, 'honest_health_database_probe_age_seconds')).toBeLessThanOrEqual(1);
      }
    } finally {
      await server.stop();
    }
  });
});
