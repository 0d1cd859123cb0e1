import type { Logger } from '../util/log.js';
import type { SqlSession } from './types.js';

// Arbitrary but fixed: every replica of this app must contend for the same advisory lock.
export const MIGRATION_LOCK_KEY = 4875233190112093n;

export const DEFAULT_MIGRATION_LOCK_TIMEOUT_MS = 120_000;
const POLL_MS = 200;
const LOG_EVERY_MS = 5000;

export interface LockWaitOptions {
  /** Past this the wait fails (boot fails hard); 0 fails at once if another session holds the lock. */
  timeoutMs?: number;
  /** Date.now() past which the wait fails, when it started before this call: `timeoutMs` is still what is reported. */
  deadline?: number;
  /** Aborts the wait (a signal during boot): the caller rolls back and stops. */
  signal?: AbortSignal;
  /** Poll interval; tests shorten it. */
  pollMs?: number;
}

export interface LockHolder {
  pid: number | null;
  applicationName: string | null;
}

export class MigrationLockTimeout extends Error {
  override name = 'MigrationLockTimeout';
  constructor(
    readonly holder: LockHolder | undefined,
    readonly timeoutMs: number,
  ) {
    super(
      `the migration lock is still held by ${describeHolder(holder)} after ${timeoutMs} ms (MIGRATION_LOCK_TIMEOUT_MS)`,
    );
  }
}

export class MigrationInterrupted extends Error {
  override name = 'MigrationInterrupted';
  constructor() {
    super('waiting for the migration lock was interrupted');
  }
}

/**
 * Begins a transaction on the session and takes the migration lock for it: the caller's COMMIT or
 * ROLLBACK releases it. Between polls no transaction stays open, and every statement of the one that
 * holds the lock is a simple-protocol query: an idle transaction keeps the xmin of an extended-protocol
 * statement, and CREATE INDEX CONCURRENTLY on another session waits for every such xmin (a waiting
 * replica's included) to go. Transaction-scoped
 * on purpose: Postgres releases it at COMMIT or ROLLBACK on the very server connection that took it,
 * so nothing can leak through a transaction-mode pooler (PgBouncer: "Session-level advisory locks:
 * Never" in transaction pooling) and there is no unlock whose result could be lost. It polls
 * `pg_try_advisory_xact_lock` rather than blocking, so the wait can be logged with its holder,
 * bounded and interrupted without a second connection.
 */
export async function acquireMigrationLock(
  session: SqlSession,
  log: Logger,
  options: LockWaitOptions = {},
): Promise<void> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_MIGRATION_LOCK_TIMEOUT_MS;
  const allowedMs = options.deadline === undefined ? timeoutMs : Math.max(0, options.deadline - Date.now());
  const pollMs = options.pollMs ?? POLL_MS;
  const started = performance.now();
  let lastLogged = Number.NEGATIVE_INFINITY;
  let lastHolder: LockHolder | undefined;
  for (;;) {
    if (options.signal?.aborted) throw new MigrationInterrupted();
    // READ COMMITTED whatever the database's default: once the lock is held, the reads that follow
    // must see the migrations the previous holder committed.
    await session.query('BEGIN ISOLATION LEVEL READ COMMITTED');
    const { rows } = await session
      .query<{ locked: boolean }>(`SELECT pg_try_advisory_xact_lock(${MIGRATION_LOCK_KEY}) AS locked`)
      .catch(async (err: unknown) => {
        await session.query('ROLLBACK').catch(() => {});
        throw err;
      });
    const waited = Math.round(performance.now() - started);
    if (rows[0]?.locked === true) {
      if (lastHolder !== undefined || waited >= LOG_EVERY_MS)
        log.info('migration lock acquired', { waited_ms: waited });
      return;
    }
    await session.query('ROLLBACK');
    const holder = await findHolder(session);
    if (waited >= allowedMs) throw new MigrationLockTimeout(holder ?? lastHolder, timeoutMs);
    // A holder that vanished between the two statements is about to let go: no line for it.
    const changed = holder !== undefined && holder.pid !== lastHolder?.pid;
    if (changed || performance.now() - lastLogged >= LOG_EVERY_MS) {
      log.warn('waiting for the migration lock', {
        holder_pid: holder?.pid ?? null,
        holder_application_name: holder?.applicationName ?? null,
        waited_ms: waited,
        timeout_ms: timeoutMs,
      });
      lastLogged = performance.now();
    }
    lastHolder = holder ?? lastHolder;
    await sleep(Math.min(pollMs, Math.max(0, allowedMs - waited)), options.signal);
  }
}

// An advisory lock on a bigint key shows in pg_locks as classid = high 32 bits, objid = low 32 bits,
// objsubid = 1 (PostgreSQL docs, "pg_locks"). Behind a pooler the pid is one of the pooler's server
// connections.
async function findHolder(session: SqlSession): Promise<LockHolder | undefined> {
  const { rows } = await session.query<{ pid: number | null; application_name: string | null }>(
    `SELECT l.pid, a.application_name
       FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
        AND l.classid = $1::oid AND l.objid = $2::oid
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      LIMIT 1`,
    [(MIGRATION_LOCK_KEY >> 32n).toString(), (MIGRATION_LOCK_KEY & 0xffffffffn).toString()],
  );
  const row = rows[0];
  return row ? { pid: row.pid, applicationName: row.application_name } : undefined;
}

function describeHolder(holder: LockHolder | undefined): string {
  if (!holder) return 'another session';
  const name = holder.applicationName ? ` (application_name "${holder.applicationName}")` : '';
  return `pid ${holder.pid ?? 'unknown'}${name}`;
}

export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((done) => {
    const timer = setTimeout(finish, ms);
    signal?.addEventListener('abort', finish, { once: true });
    function finish() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', finish);
      done();
    }
  });
}
