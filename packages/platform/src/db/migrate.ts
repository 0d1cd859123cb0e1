import type { Logger } from '../util/log.js';
import { acquireMigrationLock, type LockWaitOptions } from './migration-lock.js';
import type { DatabasePool, SqlSession } from './types.js';

/** One drizzle-kit migration, bundled into the app so that no runtime reads the filesystem. */
export interface Migration {
  tag: string;
  /** sha256 of the SQL file, as drizzle-kit's migrator records it. */
  hash: string;
  /** The journal's `when`: drizzle's migrator orders and compares by it. */
  createdAt: number;
  statements: string[];
}

// Same table as drizzle-orm's migrator, so `drizzle-kit migrate` and this agree on what is applied.
const TABLE = 'drizzle.__drizzle_migrations';

export interface MigrateResult {
  applied: string[];
}

export type MigrateOptions = LockWaitOptions;

/**
 * Applies pending migrations in one transaction that first takes a transaction-scoped advisory lock.
 * Drizzle's migrator takes no lock (drizzle-orm #874): replicas that boot together would race to
 * apply the same migration. Everything (lock, check, apply) runs inside that one transaction, so it
 * works the same on a direct connection and through session- or transaction-mode poolers.
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
      await ensureTable(session);
      const last = await lastAppliedAt(session);
      const pending = migrations.filter((m) => m.createdAt > last);
      for (const m of pending) {
        for (const statement of m.statements) await session.query(statement);
        await session.query(`INSERT INTO ${TABLE} (hash, created_at) VALUES ($1, $2)`, [m.hash, m.createdAt]);
      }
      // COMMIT (or the ROLLBACK below) releases the lock: there is no unlock to forget or misroute.
      await session.query('COMMIT');
      const applied = pending.map((m) => m.tag);
      if (applied.length > 0) log.info('migrations applied', { applied });
      return { applied };
    } catch (err) {
      await session.query('ROLLBACK').catch(() => {});
      throw err;
    }
  });
}

export type SchemaState =
  | { status: 'current' }
  | { status: 'behind' | 'ahead'; applied: number; bundled: number };

/**
 * For runtimes that cannot migrate at boot (Workers): is the database at the bundled migration?
 * Takes only the newest migration's timestamp, so such a runtime need not carry the SQL.
 */
export async function schemaState(pool: DatabasePool, bundled: number): Promise<SchemaState> {
  const { rows } = await pool.query<{ exists: boolean }>(
    `SELECT to_regclass('${TABLE}') IS NOT NULL AS exists`,
  );
  const applied = rows[0]?.exists ? await lastAppliedAt(pool) : 0;
  if (applied === bundled) return { status: 'current' };
  return { status: applied < bundled ? 'behind' : 'ahead', applied, bundled };
}

// Looks before creating: CREATE ... IF NOT EXISTS checks the CREATE privilege first, and a
// least-privilege role with nothing pending must still be able to boot.
async function ensureTable(session: SqlSession): Promise<void> {
  if (await tableExists(session)) return;
  await session.query('CREATE SCHEMA IF NOT EXISTS drizzle');
  await session.query(
    `CREATE TABLE IF NOT EXISTS ${TABLE} (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)`,
  );
}

async function tableExists(session: SqlSession): Promise<boolean> {
  const { rows } = await session.query<{ exists: boolean }>(
    `SELECT to_regclass('${TABLE}') IS NOT NULL AS exists`,
  );
  return rows[0]?.exists === true;
}

async function lastAppliedAt(session: SqlSession): Promise<number> {
  const { rows } = await session.query<{ created_at: string | number }>(
    `SELECT created_at FROM ${TABLE} ORDER BY created_at DESC LIMIT 1`,
  );
  return Number(rows[0]?.created_at ?? 0);
}
