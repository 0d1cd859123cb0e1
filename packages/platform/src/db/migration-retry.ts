import { errorCode } from '../util/error-chain.js';
import type { Logger } from '../util/log.js';
import { MigrationInterrupted, sleep } from './migration-lock.js';
import type { SqlSession } from './types.js';

export { MigrationInterrupted };

/** The `lock_timeout` of one attempt (MIGRATION_LOCK_ATTEMPT_MS): well under what a request may wait. */
export const DEFAULT_LOCK_ATTEMPT_MS = 500;
// The back-off between attempts doubles from the attempt's own length up to this, with jitter, so that
// replicas and retries do not line up behind the same reader.
const MAX_BACKOFF_MS = 4000;

export interface LockRetry {
  session: SqlSession;
  log: Logger;
  /** Date.now() past which a lock wait fails the migration. */
  deadline: number;
  /** What the deadline came from (MIGRATION_LOCK_TIMEOUT_MS), for the message. */
  timeoutMs: number;
  attemptMs: number;
  signal?: AbortSignal;
}

/** A session that holds a lock a migration waits for. */
export type LockHolder = {
  pid: number;
  application_name: string | null;
  state: string | null;
  xact_ms: number | null;
  relation: string;
};

/** A migration that waited past MIGRATION_LOCK_TIMEOUT_MS for a table lock: names the table and its holders. */
export class MigrationLockWaitTimeout extends Error {
  override name = 'MigrationLockWaitTimeout';
  constructor(
    readonly migration: string,
    readonly relations: readonly string[],
    readonly holders: readonly LockHolder[],
    timeoutMs: number,
  ) {
    super(
      `migration ${migration} waited ${timeoutMs} ms (MIGRATION_LOCK_TIMEOUT_MS) for a lock on ${relations.join(', ') || 'its tables'}${describeHolders(holders)}`,
    );
  }
}

/**
 * Runs `attempt` until it does not fail on a lock timeout (55P03): between attempts it backs off with
 * jitter, logging what it waits for and who holds it; past the deadline it fails naming both. Any other
 * error passes through at once.
 */
export async function withLockRetry<T>(
  retry: LockRetry,
  migration: string,
  statements: readonly string[],
  attempt: (attemptMs: number) => Promise<T>,
  options: { concurrent?: boolean } = {},
): Promise<T> {
  for (let n = 0; ; n++) {
    if (retry.signal?.aborted) throw new MigrationInterrupted();
    try {
      return await attempt(retry.attemptMs);
    } catch (err) {
      if (errorCode(err) !== '55P03') throw err;
      const relations = lockedRelations(statements);
      const holders = await lockHolders(retry.session, relations).catch(() => []);
      const left = retry.deadline - Date.now();
      if (left <= 0) throw new MigrationLockWaitTimeout(migration, relations, holders, retry.timeoutMs);
      const backoff = Math.min(MAX_BACKOFF_MS, retry.attemptMs * 2 ** n);
      const wait = Math.min(left, Math.round(backoff * (0.5 + Math.random() / 2)));
      retry.log.warn('migration waits for a lock', {
        migration,
        relations,
        holders,
        attempt: n + 1,
        retry_in_ms: wait,
        ...(options.concurrent ? { concurrent: true } : {}),
      });
      await sleep(wait, retry.signal);
    }
  }
}

const IDENT = String.raw`(?:"[^"]+"|[A-Za-z_][\w$]*)`;
const RELATION = new RegExp(
  String.raw`\b(?:ALTER TABLE|DROP TABLE|ON|REFERENCES|INTO|UPDATE|FROM|LOCK TABLE)\s+(?:ONLY\s+)?(?:IF (?:NOT )?EXISTS\s+)?(${IDENT}(?:\.${IDENT})?)`,
  'gi',
);

/** The tables a migration's statements name, as a lock wait's "on what". */
export function lockedRelations(statements: readonly string[]): string[] {
  const names = statements.flatMap((s) => [...s.matchAll(RELATION)].map((m) => m[1] as string));
  return [...new Set(names)].filter((n) => !/^(CONFLICT|COMMIT)$/i.test(n)).slice(0, 5);
}

// Who holds a lock on those tables now: the pid, its application_name and how long its transaction
// has been open. Never the query's text, which may hold data.
async function lockHolders(session: SqlSession, relations: readonly string[]): Promise<LockHolder[]> {
  if (relations.length === 0) return [];
  const { rows } = await session.query<LockHolder>(
    `SELECT DISTINCT a.pid, a.application_name, a.state,
            (extract(epoch FROM now() - a.xact_start) * 1000)::bigint AS xact_ms,
            l.relation::regclass::text AS relation
       FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.granted AND a.pid <> pg_backend_pid()
        AND l.relation IN (SELECT to_regclass(r) FROM unnest($1::text[]) AS r)
      ORDER BY xact_ms DESC NULLS LAST
      LIMIT 5`,
    [relations],
  );
  return rows.map((r) => ({
    ...r,
    pid: Number(r.pid),
    xact_ms: r.xact_ms === null ? null : Number(r.xact_ms),
  }));
}

function describeHolders(holders: readonly LockHolder[]): string {
  if (holders.length === 0) return '';
  const each = holders.map(
    (h) =>
      `pid ${h.pid}${h.application_name ? ` ("${h.application_name}")` : ''}${h.xact_ms === null ? '' : `, in a transaction for ${h.xact_ms} ms`}`,
  );
  return `, held by ${each.join('; ')}`;
}

/**
 * The index a CONCURRENTLY statement builds or drops (as written, quotes kept), else undefined: such
 * statements run outside a transaction block.
 */
export function concurrentIndexName(statement: string): string | undefined {
  const m = new RegExp(
    String.raw`^\s*(?:--[^\n]*\n\s*)*(?:CREATE\s+(?:UNIQUE\s+)?INDEX|DROP\s+INDEX|REINDEX\s+INDEX)\s+CONCURRENTLY\s+(?:IF (?:NOT )?EXISTS\s+)?(${IDENT}(?:\.${IDENT})?)`,
    'i',
  ).exec(statement);
  return m?.[1];
}
