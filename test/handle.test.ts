import { createLogger, loadConfig } from '@honest-health/platform';
import { DatabaseHandle } from '@honest-health/platform/db';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDriver } from '../src/app/databases.js';
import { type Cluster, startCluster } from './support/postgres.js';
import { until } from './support/until.js';

let cluster: Cluster;
beforeAll(async () => {
  cluster = await startCluster();
});
afterAll(async () => {
  await cluster?.remove();
});

const quiet = createLogger('error', {}, () => {});

describe('database handle', () => {
  it('builds lazily, rebuilds after dispose, and disposes once per generation', async () => {
    const config = loadConfig({ DATABASE_URL: cluster.url() });
    const driver = openDriver(config, quiet);
    await driver.ready();
    const handle = new DatabaseHandle(driver, 'app', quiet);
    try {
      expect(handle.stats()).toEqual({ total: 0, idle: 0, waiting: 0 });
      const first = handle.pool;
      await first.query('SELECT 1');
      const seen = handle.generation;

      // Many callers failing on the same pool: one rebuild, not a stampede.
      await Promise.all(
        Array.from({ length: 10 }, () => handle.dispose({ source: 'request', reason: 'test' }, seen)),
      );
      expect(handle.generation).toBe(seen + 1);
      expect(handle.disposals).toBe(1);

      const second = handle.pool;
      expect(second).not.toBe(first);
      expect((await second.query<{ one: number }>('SELECT 1 AS one')).rows[0]?.one).toBe(1);
      await expect(first.query('SELECT 1')).rejects.toThrow();
    } finally {
      await handle.close();
    }
    expect(() => handle.pool).toThrow(/closed/);
  });

  it('lets queries in flight on a disposed pool finish', async () => {
    const config = loadConfig({ DATABASE_URL: cluster.url() });
    const driver = openDriver(config, quiet);
    await driver.ready();
    const handle = new DatabaseHandle(driver, 'app', quiet);
    const watcher = new pg.Client(cluster.url());
    await watcher.connect();
    try {
      const slow = handle.pool.query<{ v: number }>('SELECT pg_sleep(1), 7 AS v');
      // In flight means running on the server: a query still waiting for its connection when the pool
      // ends fails at once instead, for the request path to retry on the fresh pool (pg-compatible.ts).
      await until(
        async () =>
          (
            await watcher.query<{ n: number }>(
              "SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND query = 'SELECT pg_sleep(1), 7 AS v'",
            )
          ).rows[0]?.n,
        (n) => n === 1,
        10_000,
        10,
      );
      const disposed = handle.dispose({ source: 'request', reason: 'test' });
      expect((await slow).rows[0]?.v).toBe(7);
      await disposed;
    } finally {
      await watcher.end();
      await handle.close();
    }
  });

  it('keeps the process alive when an idle client is terminated by the server', async () => {
    const config = loadConfig({ DATABASE_URL: cluster.url() });
    const warnings: string[] = [];
    const log = createLogger('warn', {}, (line) => warnings.push(line));
    const driver = openDriver(config, log);
    await driver.ready();
    const handle = new DatabaseHandle(driver, 'app', log);
    try {
      await handle.pool.query('SELECT 1');
      await cluster.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'honest-health:app'`,
      );
      await new Promise((r) => setTimeout(r, 200));
      expect(warnings.some((w) => w.includes('idle database client failed'))).toBe(true);
      expect((await handle.pool.query('SELECT 1')).rows).toHaveLength(1);
    } finally {
      await handle.close();
    }
  });
});
