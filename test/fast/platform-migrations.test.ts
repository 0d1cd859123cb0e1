// The platform migrates its own tables (health_heartbeat, tick_health), before the app's migrations
// and under the same lock, recorded in drizzle.__drizzle_migrations_platform. On a new database it
// creates them; on one the previous release built (where the app's migrations created them) it
// records its migration and changes nothing, and that release's rows stay.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createLogger, type DatabasePool } from '@honest-health/platform';
import { checkSchema, migrate } from '@honest-health/platform/db';
import { createPgliteDriver } from '@honest-health/platform/drivers/pglite';
import { platformMigrations } from '@honest-health/platform/internal/db/migrations.gen';
import { afterEach, describe, expect, it } from 'vitest';
import { latestMigrationAt, migrations, schemaNeeds } from '../../src/app/migrations.gen.js';
import { freshPgliteDir } from '../support/pglite-template.js';
import { repoRoot } from '../support/server.js';

const log = createLogger('error', {}, () => {});
const bundled = { latestMigrationAt, needs: schemaNeeds };
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function freshPool(): Promise<DatabasePool> {
  const data = await freshPgliteDir();
  const driver = createPgliteDriver({ dataDir: data.dir });
  await driver.ready();
  cleanups.push(data.remove, () => driver.close());
  return driver.createPool('app');
}

/**
 * What the previous release ran: the app's SQL files as drizzle-kit wrote them, in one transaction,
 * recorded in the app's table only.
 */
// The previous release's migrations: those written before classes were, kept in the baseline.
const previousRelease = new Set(
  Object.keys(
    (JSON.parse(readFileSync(join(repoRoot, 'drizzle/baseline.json'), 'utf8')) as { migrations: object })
      .migrations,
  ),
);

async function migrateAsPreviousRelease(pool: DatabasePool): Promise<void> {
  const journal = JSON.parse(readFileSync(join(repoRoot, 'drizzle/meta/_journal.json'), 'utf8')) as {
    entries: { tag: string; when: number }[];
  };
  await pool.withSession(async (session) => {
    await session.query('BEGIN');
    await session.query('CREATE SCHEMA drizzle');
    await session.query(
      'CREATE TABLE drizzle.__drizzle_migrations (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)',
    );
    for (const { tag, when } of journal.entries.filter((e) => previousRelease.has(e.tag))) {
      const sql = readFileSync(join(repoRoot, 'drizzle', `${tag}.sql`), 'utf8');
      for (const statement of sql.split('--> statement-breakpoint').map((s) => s.trim())) {
        if (statement) await session.query(statement);
      }
      await session.query('INSERT INTO drizzle.__drizzle_migrations (hash, created_at) VALUES ($1, $2)', [
        'x',
        when,
      ]);
    }
    await session.query('COMMIT');
  });
}

const appliedPlatform = async (pool: DatabasePool) =>
  (
    await pool.query<{ created_at: string }>('SELECT created_at FROM drizzle.__drizzle_migrations_platform')
  ).rows.map((r) => Number(r.created_at));

describe("the platform's migrations", () => {
  it('on a new database: the platform first, then the app, each in its own table; then nothing', async () => {
    const pool = await freshPool();
    const { applied } = await migrate(pool, migrations, log);
    expect(applied).toEqual([
      ...platformMigrations.map((m) => `platform:${m.tag}`),
      ...migrations.map((m) => m.tag),
    ]);
    expect(await appliedPlatform(pool)).toEqual(platformMigrations.map((m) => m.createdAt));
    const { rows } = await pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations',
    );
    expect(rows[0]?.n).toBe(migrations.length);
    await pool.query("INSERT INTO health_heartbeat (instance_id) VALUES ('a')");
    await pool.query("INSERT INTO tick_health (tick, instance_id) VALUES ('t', 'a')");
    expect(await checkSchema(pool, bundled)).toEqual({ status: 'current' });
    expect((await migrate(pool, migrations, log)).applied).toEqual([]);
  });

  it('on a database the previous release built: records its migration, keeps the tables and their rows', async () => {
    const pool = await freshPool();
    await migrateAsPreviousRelease(pool);
    await pool.query("INSERT INTO health_heartbeat (instance_id, beats) VALUES ('old-replica', 41)");
    await pool.query(
      "INSERT INTO tick_health (tick, instance_id, consecutive_failures) VALUES ('t', 'old-replica', 2)",
    );
    // A Worker of this release refuses it until db:migrate has run.
    expect(await checkSchema(pool, bundled)).toMatchObject({ status: 'behind', set: 'platform', applied: 0 });

    expect((await migrate(pool, migrations, log)).applied).toEqual([
      ...platformMigrations.map((m) => `platform:${m.tag}`),
      ...migrations.filter((m) => !previousRelease.has(m.tag)).map((m) => m.tag),
    ]);
    expect(await checkSchema(pool, bundled)).toEqual({ status: 'current' });
    const beats = await pool.query<{ beats: number }>('SELECT beats FROM health_heartbeat');
    expect(beats.rows.map((r) => Number(r.beats))).toEqual([41]);
    const ticks = await pool.query<{ consecutive_failures: number }>(
      'SELECT consecutive_failures FROM tick_health',
    );
    expect(ticks.rows.map((r) => r.consecutive_failures)).toEqual([2]);
  });

  it("a Worker's schema check is one round trip on a migrated database, and still right without the tables", async () => {
    const pool = await freshPool();
    const counted = (queries: string[]): DatabasePool =>
      new Proxy(pool, {
        get: (target, key, receiver) =>
          key === 'query'
            ? (text: string, ...rest: unknown[]) => {
                queries.push(text);
                return (target.query as (text: string, ...rest: unknown[]) => unknown)(text, ...rest);
              }
            : Reflect.get(target, key, receiver),
      });
    const onNew: string[] = [];
    expect(await checkSchema(counted(onNew), bundled)).toMatchObject({
      status: 'behind',
      applied: 0,
    });
    await migrate(pool, migrations, log);
    const onMigrated: string[] = [];
    expect(await checkSchema(counted(onMigrated), bundled)).toEqual({ status: 'current' });
    expect(onMigrated).toHaveLength(1);
  });
});
