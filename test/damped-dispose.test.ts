// A damped disposal (episode.ts) keeps the pool but closes its idle connections, so the one retry of a
// request or tick that met poison opens a fresh connection, which reaches whatever is primary now
// (ARCHITECTURE.md, "Poison classification and the retry exactly once"). Against a real Postgres
// whose sessions start read-only.

import { createLogger, loadConfig } from '@honest-health/platform';
import { DatabaseHandle } from '@honest-health/platform/db';
import { PROBE_READ_ONLY } from '@honest-health/platform/internal/db/disposal';
import { FailoverEpisodes } from '@honest-health/platform/internal/db/episode';
import { withPoisonRetry } from '@honest-health/platform/internal/db/poison-retry';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDriver } from '../src/app/databases.js';
import { migratedDatabase } from './support/databases.js';
import type { Cluster } from './support/postgres.js';
import { sharedCluster } from './support/shared-postgres.js';
import { until } from './support/until.js';

let cluster: Cluster;
beforeAll(async () => {
  cluster = sharedCluster();
});
afterAll(async () => {
  await cluster?.remove();
});

async function setup() {
  const url = await migratedDatabase(cluster);
  const lines: Record<string, unknown>[] = [];
  const log = createLogger('debug', {}, (l) => lines.push(JSON.parse(l)));
  const driver = openDriver(loadConfig({ DATABASE_URL: url }), log);
  await driver.ready();
  // A long first step, so that "damped" does not depend on how fast a loaded machine runs the test.
  const episodes = new FailoverEpisodes(log, { minPoolAgeMs: 60_000 });
  const handle = new DatabaseHandle(driver, 'app', log, undefined, episodes);
  return { url, db: new URL(url).pathname.slice(1), lines, handle, episodes };
}

type Setup = Awaited<ReturnType<typeof setup>>;

/**
 * The incident on one database: new sessions come up read-only, the episode's first disposal of the
 * pool is immediate, the pool built during the episode fills with three read-only sessions, then the
 * setting is fixed for new sessions only: the pooled ones are pinned. Returns that pool's generation.
 */
async function pinPool({ db, handle, episodes }: Setup): Promise<number> {
  await handle.pool.query('CREATE TABLE beats (n int)');
  await cluster.query(`ALTER DATABASE ${db} SET default_transaction_read_only = on`);
  episodes.sign('probe', 'transaction_read_only', 'probe');
  await handle.dispose(PROBE_READ_ONLY);
  await Promise.all([1, 2, 3].map(() => handle.pool.query('SELECT pg_sleep(0.05)')));
  expect(handle.stats().idle).toBe(3);
  await cluster.query(`ALTER DATABASE ${db} RESET default_transaction_read_only`);
  return handle.generation;
}

/** A request's write, retried once on poison. */
const writeWithRetry = (handle: DatabaseHandle) =>
  withPoisonRetry(
    handle,
    async (d) => (await d.execute(sql`INSERT INTO beats VALUES (1) RETURNING n`)) as { rows: unknown[] },
    { retry: true, source: 'request', log: createLogger('error', {}, () => {}) },
  );

/** Waits (up to 5 s) until the server holds `n` sessions of the app pool on `db`; how many it holds. */
const appSessionsReach = (db: string, n: number) =>
  until(
    async () =>
      (
        await cluster.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = 'honest-health:app'`,
          [db],
        )
      ).rows[0]?.n,
    (count) => count === n,
    5000,
  );

describe('a damped disposal', () => {
  it('closes the idle connections pinned read-only, so the retry writes on a fresh one', async () => {
    const s = await setup();
    const { db, lines, handle } = s;
    try {
      const generation = await pinPool(s);
      const written = await writeWithRetry(handle);
      expect(written.rows).toEqual([{ n: 1 }]);
      // The first attempt met 25006 and the disposal was damped: same pool, idle ones closed.
      expect(handle.generation).toBe(generation);
      const damped = lines.filter((l) => l.msg === 'database pool disposal damped');
      expect(damped).toHaveLength(1);
      expect(damped[0]?.closed_idle).toBe(2);
      // The pinned sessions are gone from the server; what is left is the retry's fresh one.
      expect(await appSessionsReach(db, 1)).toBe(1);
    } finally {
      await handle.close();
    }
  });

  it('retires the connections lent out at the time: one whose read succeeds does not go back to the pool', async () => {
    const s = await setup();
    const { db, lines, handle } = s;
    try {
      await pinPool(s);
      // A read in flight on a pinned session (a list request, the api-key registry refresh) while a write
      // meets 25006 there: the read succeeds, as reads do on the old node.
      const read = handle.pool.query('SELECT pg_sleep(0.5)');
      expect((await writeWithRetry(handle)).rows).toEqual([{ n: 1 }]);
      expect(lines.filter((l) => l.msg === 'database pool disposal damped')[0]?.closed_idle).toBe(1);
      await read;
      // Its session was read-only: back in the pool, it would fail the next write there with 25006.
      expect(await appSessionsReach(db, 1)).toBe(1);
      expect(handle.stats()).toMatchObject({ total: 1, idle: 1 });
      // Every write now lands on the first try: no connection of the pool is read-only.
      for (let i = 0; i < 3; i++) await handle.db.execute(sql`INSERT INTO beats VALUES (2)`);
    } finally {
      await handle.close();
    }
  });

  it('a dispose with no pool built since the last one throws nothing away, so logs and counts nothing', async () => {
    const { lines, handle, episodes } = await setup();
    try {
      await handle.pool.query('SELECT 1');
      episodes.sign('probe', 'transaction_read_only', 'probe');
      await handle.dispose(PROBE_READ_ONLY);
      await handle.dispose(PROBE_READ_ONLY);
      expect(handle.disposals).toBe(1);
      expect(lines.filter((l) => l.msg === 'database pool disposed')).toHaveLength(1);
      episodes.close();
      const summary = lines.find((l) => / episode ended after /.test(String(l.msg)));
      expect(summary?.disposals).toBe(1);
    } finally {
      await handle.close();
    }
  });
});
