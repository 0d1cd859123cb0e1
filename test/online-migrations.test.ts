// The migrator against a real Postgres: each migration in a transaction of its own under a short
// lock_timeout, retried while a long reader holds its table (writes keep flowing meanwhile); index
// builds CONCURRENTLY outside a transaction, an INVALID index rebuilt; the schema verdict a release
// serves by; and the record of running releases a contract migration consults.
import { createLogger, type DatabasePool, loadConfig } from '@honest-health/platform';
import {
  ContractRefused,
  checkSchema,
  type Migration,
  MigrationLockWaitTimeout,
  migrate,
  recordRelease,
  releaseOf,
} from '@honest-health/platform/db';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openDriver } from '../src/app/databases.js';
import { freshDatabase } from './support/databases.js';
import type { Cluster } from './support/postgres.js';
import { sharedCluster } from './support/shared-postgres.js';
import { captureLog } from './support/ticks.js';

let cluster: Cluster;
beforeAll(async () => {
  cluster = sharedCluster();
});
afterAll(async () => {
  await cluster?.remove();
});
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

let at = 1_900_000_000_000;
const migration = (
  tag: string,
  cls: Migration['class'],
  statements: string[],
  removes?: string[],
): Migration => {
  at += 1000;
  return {
    tag,
    hash: tag,
    createdAt: at,
    ...(cls ? { class: cls } : {}),
    ...(removes ? { removes } : {}),
    statements,
  };
};

async function pool(url: string): Promise<DatabasePool> {
  const driver = openDriver(
    loadConfig({ DATABASE_URL: url }),
    createLogger('error', {}, () => {}),
  );
  await driver.ready();
  const p = driver.createPool('app');
  cleanups.push(
    () => p.end(),
    () => driver.close(),
  );
  return p;
}

async function client(url: string, name = 'reader'): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url, application_name: name });
  await c.connect();
  cleanups.push(() => c.end());
  return c;
}

/** Inserts into `things` one at a time until stopped; resolves with each insert's latency. */
async function streamWrites(url: string): Promise<{ stop(): Promise<number[]> }> {
  const writer = await client(url, 'writer');
  const latencies: number[] = [];
  let writing = true;
  const loop = (async () => {
    while (writing) {
      const t = performance.now();
      await writer.query("INSERT INTO things (v) VALUES ('w')");
      latencies.push(performance.now() - t);
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  return {
    stop: async () => {
      writing = false;
      await loop;
      return latencies;
    },
  };
}

const things = migration('0000_things', 'expand', [
  'CREATE TABLE "things" ("id" serial PRIMARY KEY, "v" text)',
]);

describe('migrations that never stall traffic', () => {
  it('retries a column added behind a long reader, while writes to the table keep flowing', async () => {
    const url = await freshDatabase(cluster);
    const p = await pool(url);
    const { log, lines } = captureLog();
    await migrate(p, [things], log);

    const reader = await client(url, 'long-reader');
    await reader.query('BEGIN');
    await reader.query('SELECT count(*) FROM things');
    const readerPid = (await reader.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;

    const writes = await streamWrites(url);

    const addColumn = migration('0001_add_w', 'expand', ['ALTER TABLE "things" ADD COLUMN "w" text']);
    const migrating = migrate(p, [things, addColumn], log, { lockAttemptMs: 100, timeoutMs: 30_000 });
    await new Promise((r) => setTimeout(r, 3000));
    await reader.query('COMMIT');
    const { applied } = await migrating;
    const latencies = await writes.stop();

    expect(applied).toEqual(['0001_add_w']);
    const waits = lines.filter((l) => l.msg === 'migration waits for a lock');
    expect(waits.length).toBeGreaterThan(1);
    expect(waits[0]).toMatchObject({ migration: '0001_add_w', relations: ['"things"'] });
    expect(waits[0]?.holders).toContainEqual(
      expect.objectContaining({ pid: readerPid, application_name: 'long-reader', relation: 'things' }),
    );
    // Without a lock_timeout the ALTER queues for ACCESS EXCLUSIVE and every insert queues behind it
    // for the reader's 3 s. With it, an insert waits at most one attempt.
    expect(latencies.length).toBeGreaterThan(20);
    expect(Math.max(...latencies)).toBeLessThan(1500);
  });

  it('gives up at the deadline naming the table and who holds it', async () => {
    const url = await freshDatabase(cluster);
    const p = await pool(url);
    const { log } = captureLog();
    await migrate(p, [things], log);
    const reader = await client(url, 'pg_dump');
    await reader.query('BEGIN');
    await reader.query('SELECT count(*) FROM things');
    const addColumn = migration('0001_add_x', 'expand', ['ALTER TABLE "things" ADD COLUMN "x" text']);
    const failed = await migrate(p, [things, addColumn], log, { lockAttemptMs: 50, timeoutMs: 1000 }).catch(
      (err: unknown) => err,
    );
    expect(failed).toBeInstanceOf(MigrationLockWaitTimeout);
    expect(String((failed as Error).message)).toMatch(
      /migration 0001_add_x waited 1000 ms \(MIGRATION_LOCK_TIMEOUT_MS\) for a lock on "things", held by pid \d+ \("pg_dump"/,
    );
    await reader.query('ROLLBACK');
  });

  it('each migration commits on its own: a failing one keeps the ones before it', async () => {
    const url = await freshDatabase(cluster);
    const p = await pool(url);
    const { log } = captureLog();
    const good = migration('0001_good', 'expand', ['ALTER TABLE "things" ADD COLUMN "g" text']);
    const bad = migration('0002_bad', 'expand', ['ALTER TABLE "things" ADD COLUMN "g" text']);
    await expect(migrate(p, [things, good, bad], log)).rejects.toThrow(/already exists/);
    const { rows } = await p.query<{ tag: string }>(
      'SELECT tag FROM drizzle.__drizzle_migrations ORDER BY id',
    );
    expect(rows.map((r) => r.tag)).toEqual(['0000_things', '0001_good']);
  });

  it('builds an index CONCURRENTLY outside a transaction, inserts never waiting on it', async () => {
    const url = await freshDatabase(cluster);
    const p = await pool(url);
    const { log } = captureLog();
    await migrate(p, [things], log);
    await p.query("INSERT INTO things (v) SELECT 'v' || g FROM generate_series(1, 200000) g");
    const index = migration('0001_index', 'expand', [
      'CREATE INDEX CONCURRENTLY IF NOT EXISTS "things_v_idx" ON "things" USING btree ("v")',
    ]);
    const writes = await streamWrites(url);
    expect((await migrate(p, [things, index], log)).applied).toEqual(['0001_index']);
    const latencies = await writes.stop();
    const { rows } = await p.query<{ valid: boolean }>(
      "SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = 'things_v_idx'::regclass",
    );
    expect(rows[0]?.valid).toBe(true);
    expect(latencies.length).toBeGreaterThan(10);
  });

  it('rebuilds an INVALID index a failed build left, rather than keeping it under IF NOT EXISTS', async () => {
    const url = await freshDatabase(cluster);
    const p = await pool(url);
    const { log, lines } = captureLog();
    await migrate(p, [things], log);
    await p.query("INSERT INTO things (v) VALUES ('dup'), ('dup')");
    const unique = migration('0001_unique', 'expand', [
      'CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "things_v_key" ON "things" USING btree ("v")',
    ]);
    await expect(migrate(p, [things, unique], log)).rejects.toThrow(/could not create unique index/);
    const state = async () =>
      (
        await p.query<{ valid: boolean }>(
          "SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass('things_v_key')",
        )
      ).rows[0]?.valid;
    expect(await state()).toBe(false);
    await p.query("DELETE FROM things WHERE v = 'dup'");
    expect((await migrate(p, [things, unique], log)).applied).toEqual(['0001_unique']);
    expect(await state()).toBe(true);
    expect(lines.some((l) => l.msg === 'rebuilding an invalid index that an earlier build left')).toBe(true);
  });

  it('two migrators at once apply each migration once', async () => {
    const url = await freshDatabase(cluster);
    const [a, b] = [await pool(url), await pool(url)];
    const { log } = captureLog();
    const set = [
      things,
      migration('0001_a', 'expand', ['ALTER TABLE "things" ADD COLUMN "a" text']),
      migration('0002_idx', 'expand', [
        'CREATE INDEX CONCURRENTLY IF NOT EXISTS "things_a_idx" ON "things" ("a")',
      ]),
    ];
    const [ra, rb] = await Promise.all([migrate(a, set, log), migrate(b, set, log)]);
    expect([...ra.applied, ...rb.applied].filter((t) => !t.startsWith('platform:')).sort()).toEqual([
      '0000_things',
      '0001_a',
      '0002_idx',
    ]);
    const { rows } = await a.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations',
    );
    expect(rows[0]?.n).toBe(3);
  });
});

describe('two releases on one schema', () => {
  const addW = () => migration('0001_add_w', 'expand', ['ALTER TABLE "things" ADD COLUMN "w" text']);
  const dropV = () =>
    migration('0002_drop_v', 'contract', ['ALTER TABLE "things" DROP COLUMN "v"'], ['things.v']);

  it('a release serves on a schema ahead by expands, and refuses one a contract took what it needs from', async () => {
    const url = await freshDatabase(cluster);
    const p = await pool(url);
    const { log } = captureLog();
    await migrate(p, [things], log);
    const previous = { latestMigrationAt: things.createdAt, needs: ['things.id', 'things.v'] };
    expect(await checkSchema(p, previous)).toEqual({ status: 'current' });

    const w = addW();
    await migrate(p, [things, w], log);
    expect(await checkSchema(p, previous)).toEqual({ status: 'ahead', migrations: ['0001_add_w'] });

    const drop = dropV();
    await migrate(p, [things, w, drop], log);
    expect(await checkSchema(p, previous)).toEqual({
      status: 'contracted',
      migration: '0002_drop_v',
      removes: ['things.v'],
    });
    // A release that no longer reads `v` serves on the contracted schema.
    const between = { latestMigrationAt: w.createdAt, needs: ['things.id', 'things.w'] };
    expect(await checkSchema(p, between)).toEqual({ status: 'ahead', migrations: ['0002_drop_v'] });
  });

  it('a contract waits while a release that needs what it removes has been seen, unless overridden', async () => {
    const url = await freshDatabase(cluster);
    const p = await pool(url);
    const { log } = captureLog();
    const w = addW();
    await migrate(p, [things, w], log);
    const old = releaseOf({ latestMigrationAt: w.createdAt, needs: ['things.id', 'things.v'] }, 'node', 'v1');
    await recordRelease(p.db, old);
    const drop = dropV();

    const refused = await migrate(p, [things, w, drop], log).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ContractRefused);
    expect((refused as Error).message).toMatch(
      /refusing contract migration 0002_drop_v: release v1 \(node, seen \d+ s ago\) needs things\.v/,
    );
    const columns = await p.query(
      "SELECT 1 FROM information_schema.columns WHERE table_name = 'things' AND column_name = 'v'",
    );
    expect(columns.rows).toHaveLength(1);

    // Seen longer ago than the window: gone.
    await p.query(
      "UPDATE platform_releases SET last_seen_at = now() - interval '2 hours' WHERE release_id = 'v1'",
    );
    expect((await migrate(p, [things, w, drop], log, { releaseWindowMs: 3600_000 })).applied).toEqual([
      '0002_drop_v',
    ]);
  });

  it('the operator override applies a contract a running release still needs', async () => {
    const url = await freshDatabase(cluster);
    const p = await pool(url);
    const { log } = captureLog();
    const w = addW();
    await migrate(p, [things, w], log);
    await recordRelease(
      p.db,
      releaseOf({ latestMigrationAt: w.createdAt, needs: ['things.v'] }, 'workers', 'v1'),
    );
    const drop = dropV();
    expect((await migrate(p, [things, w, drop], log, { allowContract: true })).applied).toEqual([
      '0002_drop_v',
    ]);
  });
});
