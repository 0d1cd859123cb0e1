import { errorCode } from '../util/error-chain.js';
import type { Logger } from '../util/log.js';
import { acquireMigrationLock, type LockWaitOptions } from './migration-lock.js';
import { latestPlatformMigrationAt, platformMigrations } from './migrations.gen.js';
import type { DatabasePool, SqlSession } from './types.js';

/** One drizzle-kit migration, bundled so that no runtime reads the filesystem. */
export interface Migration {
  tag: string;
  /** sha256 of the SQL file, as drizzle-kit's migrator records it. */
  hash: string;
  /** The journal's `when`: drizzle's migrator orders and compares by it. */
  createdAt: number;
  statements: string[];
}

// The app's table is drizzle-orm's migrator's, so `drizzle-kit migrate` and this agree on what is
// applied; the platform's own migrations have a table of their own.
const APP_TABLE = 'drizzle.__drizzle_migrations';
const PLATFORM_TABLE = 'drizzle.__drizzle_migrations_platform';

/** The platform's migrations first, then the app's: each set recorded in its own table. */
const setsWith = (app: readonly Migration[]) =>
  [
    { table: PLATFORM_TABLE, migrations: platformMigrations, label: 'platform:' },
    { table: APP_TABLE, migrations: app, label: '' },
  ] as const;

/** What `migrate` applied. */
export interface MigrateResult {
  /** Tags applied, the platform's as `platform:<tag>`. */
  applied: string[];
}

/** How long `migrate` waits for the migration lock. */
export type MigrateOptions = LockWaitOptions;

/**
 * Applies the platform's pending migrations, then the app's, in one transaction that first takes a
 * transaction-scoped advisory lock. Drizzle's migrator takes no lock (drizzle-orm #874): replicas that
 * boot together would race to apply the same migration. Everything (lock, check, apply) runs inside
 * that one transaction, so it works the same on a direct connection and through session- or
 * transaction-mode poolers.
 *
 * @example
 * ```ts
 * const { applied } = await migrate(pool, migrations, log, { timeoutMs: 120_000 });
 * // applied: ['platform:0000_platform_tables', '0000_init', ...] on a new database, [] after
 * ```
 */
export async function migrate(
  pool: DatabasePool,
  migrations: readonly Migration[],
  log: Logger,
  options: MigrateOptions = {},
): Promise<MigrateResult> {
  return pool.withSession(async (session) => {
    // READ COMMITTED whatever the database's default: after waiting for the lock, the check below
    // must see the migrations the previous holder committed, not a snapshot from before the wait.
    await session.query('BEGIN ISOLATION LEVEL READ COMMITTED');
    try {
      await acquireMigrationLock(session, log, options);
      const applied: string[] = [];
      for (const set of setsWith(migrations)) {
        await ensureTable(session, set.table);
        const last = await lastAppliedAt(session, set.table);
        for (const m of set.migrations.filter((m) => m.createdAt > last)) {
          for (const statement of m.statements) await session.query(statement);
          await session.query(`INSERT INTO ${set.table} (hash, created_at) VALUES ($1, $2)`, [
            m.hash,
            m.createdAt,
          ]);
          applied.push(`${set.label}${m.tag}`);
        }
      }
      // COMMIT (or the ROLLBACK below) releases the lock: there is no unlock to forget or misroute.
      await session.query('COMMIT');
      if (applied.length > 0) log.info('migrations applied', { applied });
      return { applied };
    } catch (err) {
      await session.query('ROLLBACK').catch(() => {});
      throw err;
    }
  });
}

/** Whether the database's schema is at the bundled migrations, behind them, or ahead of them. */
export type SchemaState =
  | { status: 'current' }
  | { status: 'behind' | 'ahead'; applied: number; bundled: number };

/**
 * For runtimes that cannot migrate at boot (Workers): is the database at the bundled migrations, the
 * platform's and the app's? Takes only the app's newest migration's timestamp, so such a runtime need
 * not carry the SQL. The first set not current answers.
 */
export async function schemaState(pool: DatabasePool, bundled: number): Promise<SchemaState> {
  const applied = await appliedAt(pool);
  for (const [newest, at] of [
    [latestPlatformMigrationAt, applied.platform],
    [bundled, applied.app],
  ] as const) {
    if (at !== newest) return { status: at < newest ? 'behind' : 'ahead', applied: at, bundled: newest };
  }
  return { status: 'current' };
}

/**
 * The newest migration each set has applied (0: none). One round trip where both tables exist, which
 * is every database this release migrated: an isolate's boot waits for it. Where one is missing (a new
 * database, or one only the previous release migrated), each table is looked up on its own.
 */
async function appliedAt(pool: DatabasePool): Promise<{ platform: number; app: number }> {
  try {
    const { rows } = await pool.query<{ platform: string | number | null; app: string | number | null }>(
      `SELECT (SELECT max(created_at) FROM ${PLATFORM_TABLE}) AS platform,
              (SELECT max(created_at) FROM ${APP_TABLE}) AS app`,
    );
    return { platform: Number(rows[0]?.platform ?? 0), app: Number(rows[0]?.app ?? 0) };
  } catch (err) {
    // undefined_table
    if (errorCode(err) !== '42P01') throw err;
  }
  const at = async (table: string) =>
    (await tableExists(pool, table)) ? await lastAppliedAt(pool, table) : 0;
  return { platform: await at(PLATFORM_TABLE), app: await at(APP_TABLE) };
}

// Looks before creating: CREATE ... IF NOT EXISTS checks the CREATE privilege first, and a
// least-privilege role with nothing pending must still be able to boot.
async function ensureTable(session: SqlSession, table: string): Promise<void> {
  if (await tableExists(session, table)) return;
  await session.query('CREATE SCHEMA IF NOT EXISTS drizzle');
  await session.query(
    `CREATE TABLE IF NOT EXISTS ${table} (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)`,
  );
}

async function tableExists(session: SqlSession, table: string): Promise<boolean> {
  const { rows } = await session.query<{ exists: boolean }>(
    `SELECT to_regclass('${table}') IS NOT NULL AS exists`,
  );
  return rows[0]?.exists === true;
}

async function lastAppliedAt(session: SqlSession, table: string): Promise<number> {
  const { rows } = await session.query<{ created_at: string | number }>(
    `SELECT created_at FROM ${table} ORDER BY created_at DESC LIMIT 1`,
  );
  return Number(rows[0]?.created_at ?? 0);
}
