import { sql } from 'drizzle-orm';
import type { Database } from '../../platform/db/types.js';

// The push tick's statements. Each is one statement, so every driver runs them, Neon's HTTP one (no
// interactive transactions) included; per-row values travel as array parameters, so a statement's
// text and parameter count do not grow with the batch.

/** A claimed push, with what the tick needs of its connection (null when it has none). */
export interface ClaimedPush {
  id: string;
  connection_id: string | null;
  payload: unknown;
  /** Counting this attempt. */
  attempts: number;
  tenant_id: string | null;
  /** The connection's grant: the token pair it pushes with. */
  grant_id: string | null;
  /** The connection exists and is `active`, and so is its grant. */
  active: boolean | null;
  /** The grant's token_version. */
  token_version: number | null;
  /** An access token is stored and outlives the next few seconds. */
  token_fresh: boolean | null;
}

export interface ClaimOptions {
  owner: string;
  leaseMs: number;
  batchSize: number;
  /** Tenants whose per-minute budget is used up in this process: their pushes are left for later. */
  skipTenants: readonly string[];
}

/**
 * What Xero's signals (stored by recordLimitSignals) hold back, read by every replica's next claim: all
 * pushes while the app is paused (a 429 `appminute`, or X-AppMinLimit-Remaining 0 in the last 60 s), and the pushes of a tenant that is parked (a 429
 * `day`) or whose minute or day budget read 0 on an answer of the last 60 s.
 */
const heldBySignals = sql`
  AND NOT EXISTS (SELECT 1 FROM xero_app_limits a WHERE a.id = 'app' AND (a.paused_until > now()
    OR (a.app_min_remaining = 0 AND a.updated_at > now() - interval '60 seconds')))
  AND (connection_id IS NULL OR NOT EXISTS (
    SELECT 1 FROM xero_connections s WHERE s.id = connection_id AND (
      s.parked_until > now()
      OR ((s.min_remaining = 0 OR s.day_remaining = 0) AND s.limits_seen_at > now() - interval '60 seconds'))))`;

/**
 * Claims due pushes and writes the lease in one statement (UPDATE ... WHERE id = ANY(ARRAY(SELECT ...
 * FOR UPDATE SKIP LOCKED))), so replicas never take the same push, and looks up each one's connection
 * in the same round trip. A lease this owner still holds (a re-run after a failover) may be taken back.
 * ARRAY(...) runs the locking subquery once and updates the rows it returns by primary key; `id IN
 * (SELECT ...)` was planned as a hash semi-join over a scan of the whole table, on every claim. The
 * connection is looked up by primary key per claimed push (LATERAL) for the same reason.
 */
export async function claimPushes(db: Database, o: ClaimOptions): Promise<ClaimedPush[]> {
  const skip =
    o.skipTenants.length === 0
      ? sql``
      : sql`AND (connection_id IS NULL OR connection_id NOT IN (
              SELECT id FROM xero_connections WHERE tenant_id = ANY(${sql.param(o.skipTenants)}::text[])))`;
  return rowsOf<ClaimedPush>(
    await db.execute(sql`
      WITH claimed AS (
        UPDATE invoice_pushes SET
          lease_owner = ${o.owner},
          lease_expires_at = now() + ${`${o.leaseMs} milliseconds`}::interval,
          attempts = attempts + 1,
          updated_at = now()
        WHERE id = ANY(ARRAY(
          SELECT id FROM invoice_pushes
          -- Literal, not bound: it must match the partial index's predicate for the planner to use it.
          WHERE status IN ('queued', 'failed')
            AND next_attempt_at <= now()
            AND (lease_expires_at IS NULL OR lease_expires_at < now() OR lease_owner = ${o.owner})
            ${skip}
            ${heldBySignals}
          ORDER BY next_attempt_at
          LIMIT ${o.batchSize}
          FOR UPDATE SKIP LOCKED))
        RETURNING id, connection_id, payload, attempts, next_attempt_at)
      SELECT p.id, p.connection_id, p.payload, p.attempts, c.tenant_id, c.grant_id, c.active, c.token_version,
             c.token_fresh
      FROM claimed p LEFT JOIN LATERAL (
        SELECT xc.tenant_id, xc.grant_id, (xc.status = 'active' AND g.status = 'active') AS active, g.token_version,
               (g.access_token_enc IS NOT NULL AND g.access_expires_at > now() + interval '5 seconds') AS token_fresh
        FROM xero_connections xc JOIN xero_grants g ON g.id = xc.grant_id
        WHERE xc.id = p.connection_id) c ON true
      ORDER BY p.next_attempt_at`),
  );
}

/** What a push's row becomes; absent fields keep their value. */
export interface Settlement {
  id: string;
  status?: 'pushed' | 'failed' | 'dead' | 'awaiting_connection';
  retryInMs?: number;
  attempts?: number;
  lastError?: string;
  xeroInvoiceId?: string;
}

/**
 * Records the batch's outcomes in one statement, fenced on the lease: a push whose lease expired and
 * was taken by another replica is left to that replica. The owner travels as a column of each row, not
 * as one constant: compared with a constant, `lease_owner` (NULL in almost every row when statistics
 * were taken) looks like it matches one row, and the planner then rescans the whole unnest() once
 * per row it updates (3× slower at 200 rows, measured); as a join column it hashes them. The extra
 * `p.id = ANY(...)` lets the planner find the rows by primary key instead of scanning the table.
 */
export async function settlePushes(
  db: Database,
  owner: string,
  settlements: readonly Settlement[],
): Promise<void> {
  for (let i = 0; i < settlements.length; i += SETTLE_CHUNK) {
    const chunk = settlements.slice(i, i + SETTLE_CHUNK);
    const column = <T>(pick: (s: Settlement) => T) => sql.param(chunk.map(pick));
    await db.execute(sql`
      UPDATE invoice_pushes AS p SET
        status = coalesce(v.status, p.status),
        attempts = coalesce(v.attempts, p.attempts),
        next_attempt_at = CASE WHEN v.retry_ms IS NULL THEN p.next_attempt_at
                               ELSE now() + v.retry_ms * interval '1 millisecond' END,
        xero_invoice_id = coalesce(v.xero_id, p.xero_invoice_id),
        last_error = CASE WHEN v.xero_id IS NOT NULL THEN NULL ELSE coalesce(v.last_error, p.last_error) END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        updated_at = now()
      FROM unnest(
        ${column((s) => s.id)}::uuid[],
        ${column((s) => s.status ?? null)}::text[],
        ${column((s) => (s.attempts === undefined ? null : Math.max(0, s.attempts)))}::int[],
        ${column((s) => (s.retryInMs === undefined ? null : Math.round(s.retryInMs)))}::bigint[],
        ${column((s) => s.lastError ?? null)}::text[],
        ${column((s) => s.xeroInvoiceId ?? null)}::text[],
        ${column(() => owner)}::text[]
      ) AS v(id, status, attempts, retry_ms, last_error, xero_id, owner)
      WHERE p.id = v.id AND p.lease_owner = v.owner AND p.id = ANY(${column((s) => s.id)}::uuid[])`);
  }
}

// PUSH_BATCH_SIZE is at most 1000: one statement per batch.
const SETTLE_CHUNK = 1000;

/** Xero answered 401: expire these grants' access tokens so the refresh tick renews them first. */
export async function expireAccessTokens(db: Database, grantIds: readonly string[]): Promise<void> {
  if (grantIds.length === 0) return;
  await db.execute(sql`
    UPDATE xero_grants SET access_expires_at = now(), updated_at = now()
    WHERE id = ANY(${sql.param(grantIds)}::uuid[])`);
}

/** Xero answered 403: the tenant was disconnected in Xero, or the grant lacks a scope. */
export async function markForbidden(db: Database, forbidden: ReadonlyMap<string, string>): Promise<void> {
  if (forbidden.size === 0) return;
  await db.execute(sql`
    UPDATE xero_connections AS c SET status = 'needs_reauth', status_reason = v.reason, updated_at = now()
    FROM unnest(${sql.param([...forbidden.keys()])}::uuid[], ${sql.param([...forbidden.values()])}::text[])
      AS v(id, reason)
    WHERE c.id = v.id`);
}

/** The latest signals per tenant connection, from Xero's answer headers and 429s. */
export interface TenantSignals {
  connectionId: string;
  minRemaining: number | null;
  dayRemaining: number | null;
  /** A 429 `day`: no push for this tenant for this long. */
  parkForMs: number | null;
}

/** App-wide: X-AppMinLimit-Remaining, and a pause from a 429 `appminute`. */
export interface AppSignals {
  appMinRemaining: number | null;
  pausedForMs: number | null;
}

/**
 * Stores what Xero's answers said, where the next claim (on any replica) reads it. Deliberately plain
 * columns (docs/xero.md): a shared budget across replicas, its own issue, builds on them.
 */
export async function recordLimitSignals(
  db: Database,
  tenants: readonly TenantSignals[],
  app: AppSignals | null,
): Promise<void> {
  if (tenants.length === 0 && app === null) return;
  const column = <T>(pick: (s: TenantSignals) => T) => sql.param(tenants.map(pick));
  // One round trip for both tables: two data-modifying CTEs (an empty unnest updates nothing, and the
  // app row is only written when `app` is given).
  await db.execute(sql`
    WITH tenant_signals AS (
      UPDATE xero_connections AS c SET
        min_remaining = coalesce(v.min_remaining, c.min_remaining),
        day_remaining = coalesce(v.day_remaining, c.day_remaining),
        limits_seen_at = now(),
        parked_until = CASE WHEN v.park_ms IS NULL THEN c.parked_until
                            ELSE greatest(c.parked_until, now() + v.park_ms * interval '1 millisecond') END
      FROM unnest(
        ${column((s) => s.connectionId)}::uuid[],
        ${column((s) => s.minRemaining)}::int[],
        ${column((s) => s.dayRemaining)}::int[],
        ${column((s) => (s.parkForMs === null ? null : Math.max(0, Math.round(s.parkForMs))))}::bigint[]
      ) AS v(id, min_remaining, day_remaining, park_ms)
      WHERE c.id = v.id
      RETURNING 1),
    app_signals AS (
      INSERT INTO xero_app_limits (id, app_min_remaining, paused_until, updated_at)
      SELECT 'app', ${app?.appMinRemaining ?? null}::int,
             now() + ${app?.pausedForMs ?? null}::bigint * interval '1 millisecond', now()
      WHERE ${app !== null}
      ON CONFLICT (id) DO UPDATE SET
        app_min_remaining = coalesce(excluded.app_min_remaining, xero_app_limits.app_min_remaining),
        paused_until = CASE WHEN excluded.paused_until IS NULL THEN xero_app_limits.paused_until
                            ELSE greatest(xero_app_limits.paused_until, excluded.paused_until) END,
        updated_at = now()
      RETURNING 1)
    SELECT (SELECT count(*) FROM tenant_signals) AS tenants, (SELECT count(*) FROM app_signals) AS app`);
}

/** The rows of db.execute, which every driver (node-postgres, Neon, PGlite) returns as `{ rows }`. */
function rowsOf<T>(result: unknown): T[] {
  const rows = (result as { rows?: unknown } | null)?.rows;
  if (!Array.isArray(rows)) throw new Error('the driver returned no rows array');
  return rows as T[];
}
