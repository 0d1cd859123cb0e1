import type { Logger } from '../util/log.js';
import {
  acquireMigrationLock,
  DEFAULT_MIGRATION_LOCK_TIMEOUT_MS,
  type LockWaitOptions,
} from './migration-lock.js';
import {
  concurrentIndexName,
  DEFAULT_LOCK_ATTEMPT_MS,
  type LockRetry,
  MigrationInterrupted,
  withLockRetry,
} from './migration-retry.js';
import { platformMigrations } from './migrations.gen.js';
import { refuseContractWhileNeeded } from './releases.js';
import type { DatabasePool, SqlSession } from './types.js';

/**
 * expand: adds, and a release that predates it keeps working. contract: removes or changes what a
 * release may read or write (DESIGN.md §4).
 */
export type MigrationClass = 'expand' | 'contract';

/** One drizzle-kit migration, bundled so that no runtime reads the filesystem. */
export interface Migration {
  tag: string;
  /** sha256 of the SQL file, as drizzle-kit's migrator records it. */
  hash: string;
  /** The journal's `when`: drizzle's migrator orders and compares by it. */
  createdAt: number;
  /** Unset for a migration nobody classified: checks treat it as a contract that may remove anything. */
  class?: MigrationClass;
  /** A contract's removals, as `table.column` or `table` (schema-needs.ts). */
  removes?: string[];
  statements: string[];
}

// The app's table is drizzle-orm's migrator's, so `drizzle-kit migrate` and this agree on what is
// applied (its columns come first; `tag`, `class` and `removes` are ours, and nullable); the platform's
// own migrations have a table of their own.
export const APP_MIGRATIONS_TABLE = 'drizzle.__drizzle_migrations';
export const PLATFORM_MIGRATIONS_TABLE = 'drizzle.__drizzle_migrations_platform';

/** The platform's migrations first, then the app's: each set recorded in its own table. */
const setsWith = (app: readonly Migration[]) =>
  [
    { table: PLATFORM_MIGRATIONS_TABLE, migrations: platformMigrations, label: 'platform:' },
    { table: APP_MIGRATIONS_TABLE, migrations: app, label: '' },
  ] as const;

/** What `migrate` applied. */
export interface MigrateResult {
  /** Tags applied, the platform's as `platform:<tag>`. */
  applied: string[];
}

/** How `migrate` waits for locks, and when it may apply a contract. */
export interface MigrateOptions extends LockWaitOptions {
  /**
   * `lock_timeout` of each attempt at a statement that locks a table. Postgres queues every later query
   * on a table behind a waiting ACCESS EXCLUSIVE request, so a wait longer than this would stall the
   * serving release's traffic: the attempt gives up and is retried, with back-off, until `timeoutMs`.
   */
  lockAttemptMs?: number;
  /** A release seen within this window counts as running, for the contract check (releases.ts). */
  releaseWindowMs?: number;
  /** Applies a contract even though a running release needs what it removes: an operator's override. */
  allowContract?: boolean;
}

/**
 * Applies the platform's pending migrations, then the app's, each in a transaction of its own under a
 * short `lock_timeout`, an index built CONCURRENTLY outside one. Each transaction first takes the
 * migration lock (a transaction-scoped advisory lock) and checks the migration is still pending:
 * Drizzle's migrator takes no lock (drizzle-orm #874), and replicas that boot together would race to
 * apply the same migration. Transaction-scoped, it works the same on a direct connection and through
 * session- or transaction-mode poolers, on one connection; only a CONCURRENTLY build, which cannot run
 * in a transaction, holds the lock on a second one. `timeoutMs` bounds every wait: for the migration
 * lock and for the table locks the migrations need.
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
  const timeoutMs = options.timeoutMs ?? DEFAULT_MIGRATION_LOCK_TIMEOUT_MS;
  const deadline = Date.now() + timeoutMs;
  // Most boots find nothing to do, and take no lock.
  if (!pool.singleSession && !(await anyPending(pool, migrations))) return { applied: [] };
  return pool.withSession((session) =>
    applyPending(pool, session, migrations, log, { ...options, deadline, timeoutMs }),
  );
}

type ApplyOptions = MigrateOptions & { deadline: number; timeoutMs: number };

async function anyPending(pool: DatabasePool, migrations: readonly Migration[]): Promise<boolean> {
  for (const set of setsWith(migrations)) {
    const newest = set.migrations.at(-1)?.createdAt;
    if (newest === undefined) continue;
    if (!(await tableExists(pool, set.table)) || (await lastAppliedAt(pool, set.table)) < newest) return true;
  }
  return false;
}

async function applyPending(
  pool: DatabasePool,
  session: SqlSession,
  migrations: readonly Migration[],
  log: Logger,
  options: ApplyOptions,
): Promise<MigrateResult> {
  const retry: LockRetry = {
    session,
    log,
    deadline: options.deadline,
    timeoutMs: options.timeoutMs,
    attemptMs: options.lockAttemptMs ?? DEFAULT_LOCK_ATTEMPT_MS,
    ...(options.signal ? { signal: options.signal } : {}),
  };
  // The embedded database has one session, and one process owns it: nothing to lock against.
  const lock = async (on: SqlSession) => {
    if (pool.singleSession) return on.query('BEGIN ISOLATION LEVEL READ COMMITTED');
    await acquireMigrationLock(on, log, options);
  };
  const applied: string[] = [];
  for (const set of setsWith(migrations)) {
    const exists = await tableExists(session, set.table);
    const last = exists ? await lastAppliedAt(session, set.table) : 0;
    const pending = set.migrations.filter((m) => m.createdAt > last);
    if (pending.length === 0) continue;
    await ensureTable(session, set.table, retry, lock);
    for (const m of pending) {
      if (options.signal?.aborted) throw new MigrationInterrupted();
      const started = performance.now();
      const gate = async () => {
        if (m.class === 'expand' || options.allowContract) return;
        await refuseContractWhileNeeded(session, `${set.label}${m.tag}`, m.removes, options.releaseWindowMs);
      };
      let done: boolean;
      if (m.statements.some((s) => concurrentIndexName(s) !== undefined)) {
        const build = async () => {
          await gate();
          await applyOutsideTransaction(session, set.table, m, retry);
          return true;
        };
        // The lock on a session of its own: the build runs outside any transaction on this one.
        done = pool.singleSession
          ? await build()
          : await pool.withSession(async (lockSession) => {
              await lock(lockSession);
              try {
                return (await lastAppliedAt(session, set.table)) >= m.createdAt ? false : await build();
              } finally {
                // The lock session wrote nothing: ROLLBACK only releases the lock.
                await lockSession.query('ROLLBACK').catch(() => {});
              }
            });
      } else {
        done = await withLockRetry(retry, m.tag, m.statements, async (attemptMs) => {
          await lock(session);
          try {
            // Another replica may have applied it while this one waited for the lock.
            if ((await lastAppliedAt(session, set.table)) >= m.createdAt) {
              await session.query('ROLLBACK');
              return false;
            }
            await gate();
            await session.query(`SET LOCAL lock_timeout = ${attemptMs}`);
            for (const statement of m.statements) await session.query(statement);
            await record(session, set.table, m);
            await session.query('COMMIT');
            return true;
          } catch (err) {
            await session.query('ROLLBACK').catch(() => {});
            throw err;
          }
        });
      }
      if (!done) continue;
      log.info('migration applied', {
        migration: `${set.label}${m.tag}`,
        class: m.class ?? null,
        duration_ms: Math.round(performance.now() - started),
      });
      applied.push(`${set.label}${m.tag}`);
    }
  }
  if (applied.length > 0) log.info('migrations applied', { applied });
  return { applied };
}

/**
 * A migration of CONCURRENTLY index statements: Postgres runs them only outside a transaction block,
 * one at a time, taking no lock that stops writes. Each is idempotent, so a run cut short is simply run
 * again: an index already valid is skipped, and an INVALID one (what a failed or cancelled build
 * leaves) is dropped and built again rather than kept, which `IF NOT EXISTS` alone would do.
 */
async function applyOutsideTransaction(
  session: SqlSession,
  table: string,
  m: Migration,
  retry: LockRetry,
): Promise<void> {
  const mixed = m.statements.filter((s) => concurrentIndexName(s) === undefined);
  if (mixed.length > 0) {
    throw new Error(
      `migration ${m.tag} mixes CONCURRENTLY index statements with others, which must run in a transaction: give the index statements a migration of their own`,
    );
  }
  for (const statement of m.statements) {
    const index = concurrentIndexName(statement) as string;
    const creates = /^\s*CREATE\b/i.test(statement);
    const before = await indexState(session, index);
    if (creates && before === 'valid') continue;
    if (creates && before === 'invalid') {
      retry.log.warn('rebuilding an invalid index that an earlier build left', { index, migration: m.tag });
      await withLockRetry(retry, m.tag, [statement], () =>
        session.query(`DROP INDEX CONCURRENTLY IF EXISTS ${index}`),
      );
    }
    // No short lock_timeout here: these statements never block reads or writes while they wait, and a
    // session setting would not survive a transaction-mode pooler anyway.
    await withLockRetry(retry, m.tag, [statement], () => session.query(statement), { concurrent: true });
    if (creates && (await indexState(session, index)) !== 'valid') {
      throw new Error(`index ${index} of migration ${m.tag} is INVALID after its build`);
    }
  }
  await record(session, table, m);
}

async function indexState(session: SqlSession, index: string): Promise<'valid' | 'invalid' | 'absent'> {
  const { rows } = await session.query<{ valid: boolean }>(
    'SELECT i.indisvalid AS valid FROM pg_index i WHERE i.indexrelid = to_regclass($1)',
    [index],
  );
  const row = rows[0];
  return row === undefined ? 'absent' : row.valid ? 'valid' : 'invalid';
}

async function record(session: SqlSession, table: string, m: Migration): Promise<void> {
  await session.query(
    `INSERT INTO ${table} (hash, created_at, tag, class, removes) VALUES ($1, $2, $3, $4, $5)`,
    [m.hash, m.createdAt, m.tag, m.class ?? null, m.removes ? JSON.stringify(m.removes) : null],
  );
}

// Looks before creating: CREATE ... IF NOT EXISTS checks the CREATE privilege first, and a
// least-privilege role with nothing pending must still be able to boot. A table an older release (or
// drizzle-kit) created lacks the columns that say what each migration was: they are added here. Under
// the migration lock, as two replicas creating one table at once collide.
async function ensureTable(
  session: SqlSession,
  table: string,
  retry: LockRetry,
  lock: (on: SqlSession) => Promise<unknown>,
): Promise<void> {
  const create = `CREATE TABLE IF NOT EXISTS ${table} (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint, tag text, class text, removes jsonb)`;
  const alter = `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS tag text, ADD COLUMN IF NOT EXISTS class text, ADD COLUMN IF NOT EXISTS removes jsonb`;
  await withLockRetry(retry, table, [alter], async (attemptMs) => {
    await lock(session);
    try {
      await session.query(`SET LOCAL lock_timeout = ${attemptMs}`);
      if (!(await tableExists(session, table))) {
        await session.query('CREATE SCHEMA IF NOT EXISTS drizzle');
        await session.query(create);
      } else if (!(await hasClassColumns(session, table))) {
        await session.query(alter);
      }
      await session.query('COMMIT');
    } catch (err) {
      await session.query('ROLLBACK').catch(() => {});
      throw err;
    }
  });
}

async function hasClassColumns(session: SqlSession, table: string): Promise<boolean> {
  const { rows } = await session.query<{ n: number | string }>(
    `SELECT count(*) AS n FROM pg_attribute
      WHERE attrelid = to_regclass('${table}') AND attname IN ('tag', 'class', 'removes') AND NOT attisdropped`,
  );
  return Number(rows[0]?.n ?? 0) === 3;
}

export async function tableExists(session: SqlSession, table: string): Promise<boolean> {
  const { rows } = await session.query<{ exists: boolean }>(
    `SELECT to_regclass('${table}') IS NOT NULL AS exists`,
  );
  return rows[0]?.exists === true;
}

export async function lastAppliedAt(session: SqlSession, table: string): Promise<number> {
  const { rows } = await session.query<{ created_at: string | number }>(
    `SELECT created_at FROM ${table} ORDER BY created_at DESC LIMIT 1`,
  );
  return Number(rows[0]?.created_at ?? 0);
}
