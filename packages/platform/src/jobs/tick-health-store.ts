import type { DatabasePool } from '../db/types.js';
import { causeChain } from '../util/error-chain.js';
import { sqlstateOf } from '../util/log.js';
import { TimeoutError } from '../util/timeout.js';

// The tick health table's statements. Each record is one statement (an upsert), so every driver runs
// it, Neon's HTTP one included, and every replica and cron invocation writes the same table.

/** Rows of instances not heard from in this long are deleted by the next write: the table stays bounded. */
const PRUNE_AFTER = '7 days';

const START_SQL = `
INSERT INTO tick_health AS h (tick, instance_id, last_started_at, updated_at)
VALUES ($1, $2, now(), now())
ON CONFLICT (tick, instance_id) DO UPDATE SET last_started_at = now(), updated_at = now()`;

// Success resets the failure count; a failure increments it and keeps the last success as it was.
// The prune rides along in a data-modifying CTE, so the record stays a single statement.
const FINISH_SQL = `
WITH pruned AS (
  DELETE FROM tick_health
  WHERE updated_at < now() - interval '${PRUNE_AFTER}' AND (tick, instance_id) <> ($1, $2)
)
INSERT INTO tick_health AS h
  (tick, instance_id, last_finished_at, last_success_at, last_failure_at, consecutive_failures,
   last_error_code, updated_at)
VALUES ($1, $2, now(),
        CASE WHEN $3::boolean THEN now() END,
        CASE WHEN $3::boolean THEN NULL ELSE now() END,
        CASE WHEN $3::boolean THEN 0 ELSE 1 END,
        $4::text, now())
ON CONFLICT (tick, instance_id) DO UPDATE SET
  last_finished_at = now(),
  last_success_at = CASE WHEN $3::boolean THEN now() ELSE h.last_success_at END,
  last_failure_at = CASE WHEN $3::boolean THEN h.last_failure_at ELSE now() END,
  consecutive_failures = CASE WHEN $3::boolean THEN 0 ELSE h.consecutive_failures + 1 END,
  last_error_code = CASE WHEN $3::boolean THEN h.last_error_code ELSE $4::text END,
  updated_at = now()`;

// Timestamps as epoch milliseconds, and the database's own clock: replicas' clocks may disagree.
const READ_SQL = `
SELECT tick, instance_id,
       (extract(epoch FROM last_started_at) * 1000)::float8 AS started_ms,
       (extract(epoch FROM last_finished_at) * 1000)::float8 AS finished_ms,
       (extract(epoch FROM last_success_at) * 1000)::float8 AS success_ms,
       (extract(epoch FROM last_failure_at) * 1000)::float8 AS failure_ms,
       consecutive_failures, last_error_code,
       (extract(epoch FROM now()) * 1000)::float8 AS now_ms
FROM tick_health ORDER BY tick, instance_id`;

export interface TickHealthRow {
  tick: string;
  instanceId: string;
  startedMs: number | null;
  finishedMs: number | null;
  successMs: number | null;
  failureMs: number | null;
  consecutiveFailures: number;
  lastErrorCode: string | null;
}

export interface TickHealthSnapshot {
  /** The database's clock when it was read. */
  nowMs: number;
  rows: TickHealthRow[];
}

export async function recordTickStart(pool: DatabasePool, tick: string, instanceId: string): Promise<void> {
  await pool.query(START_SQL, [tick, instanceId]);
}

/** `code` undefined: the run succeeded. */
export async function recordTickFinish(
  pool: DatabasePool,
  tick: string,
  instanceId: string,
  code: string | undefined,
): Promise<void> {
  await pool.query(FINISH_SQL, [tick, instanceId, code === undefined, code ?? null]);
}

type RawRow = Record<string, unknown>;

// Drivers differ in how they type numbers (neon-http hands back text): normalise here.
const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

export async function readTickHealth(pool: DatabasePool): Promise<TickHealthSnapshot> {
  const { rows } = await pool.query<RawRow>(READ_SQL);
  const nowMs = num(rows[0]?.now_ms) ?? Date.now();
  return {
    nowMs: rows.length ? nowMs : await databaseNow(pool),
    rows: rows.map((r) => ({
      tick: String(r.tick),
      instanceId: String(r.instance_id),
      startedMs: num(r.started_ms),
      finishedMs: num(r.finished_ms),
      successMs: num(r.success_ms),
      failureMs: num(r.failure_ms),
      consecutiveFailures: num(r.consecutive_failures) ?? 0,
      lastErrorCode: r.last_error_code === null ? null : String(r.last_error_code),
    })),
  };
}

async function databaseNow(pool: DatabasePool): Promise<number> {
  const { rows } = await pool.query<RawRow>('SELECT (extract(epoch FROM now()) * 1000)::float8 AS now_ms');
  return num(rows[0]?.now_ms) ?? Date.now();
}

const ERRNO = /^E[A-Z0-9_]{2,30}$/;

/**
 * What a failed run is recorded with: a SQLSTATE (42501), an HTTP status (503), an errno name
 * (ECONNREFUSED), `timeout`, or `error`. Never a message: messages can hold data and secrets.
 */
export function tickErrorCode(err: unknown): string {
  const sqlstate = sqlstateOf(err);
  if (sqlstate !== undefined) return sqlstate;
  for (const e of causeChain(err)) {
    const { status, code } = (e ?? {}) as { status?: unknown; code?: unknown };
    if (typeof status === 'number' && Number.isInteger(status) && status >= 100 && status <= 599) {
      return String(status);
    }
    if (typeof code === 'string' && ERRNO.test(code)) return code;
    if (e instanceof TimeoutError) return 'timeout';
  }
  return 'error';
}
