import type { Database } from '@honest-health/platform';
import { type SQL, sql } from 'drizzle-orm';
import { connectionEventData, outbox } from '../webhooks/outbox.js';
import { subWindows, type XeroBudget } from './budget.js';
import { subWindowAt } from './claim.js';

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
  // The rows in id order, as every statement that waits for several connection rows takes them.
  // connection.needs_reauth for each connection this makes so (not one already marked), in the same statement.
  await db.execute(sql`
    WITH held AS (
      SELECT c.id FROM xero_connections c WHERE c.id = ANY(${sql.param([...forbidden.keys()])}::uuid[])
      ORDER BY c.id FOR UPDATE),
    marked AS (
      UPDATE xero_connections AS c SET status = 'needs_reauth', status_reason = v.reason, updated_at = now()
      FROM unnest(${sql.param([...forbidden.keys()])}::uuid[], ${sql.param([...forbidden.values()])}::text[])
        AS v(id, reason) LEFT JOIN (SELECT count(*) AS n FROM held) locked ON true
      JOIN xero_connections o ON o.id = v.id
      WHERE c.id = v.id
      RETURNING c.id, c.organization_id, c.tenant_id, c.tenant_name, c.status_reason AS reason, o.status AS was),
    newly AS (SELECT * FROM marked WHERE was = 'active'),
    ${outbox('reauth', 'newly', 'connection.needs_reauth', connectionEventData)}
    SELECT count(*) FROM marked`);
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
 * Stores what Xero's answers said, where the next claim (on any replica) reads it: the remaining counts
 * (for operators), a park (429 `day`) or an app pause (429 `appminute`), and the budget lowered to
 * what Xero says is left. A tenant whose X-MinLimit-Remaining says 10 while our count says 40 are
 * left gets 30 calls counted in the current sub-window (they age out with the window like any other): the budget takes the
 * lower of the two, never the sum, so our own calls are not counted twice. Likewise for the day and
 * for X-AppMinLimit-Remaining. Locks the connection rows in id order, then the app's row: the claim's
 * order (claim.ts).
 */
export async function recordLimitSignals(
  db: Database,
  budget: XeroBudget,
  tenants: readonly TenantSignals[],
  app: AppSignals | null,
): Promise<void> {
  if (tenants.length === 0 && app === null) return;
  const column = <T>(pick: (s: TenantSignals) => T) => sql.param(tenants.map(pick));
  const minute = subWindows(budget, 'minute');
  const day = subWindows(budget, 'day');
  // Counts the calls Xero's count holds beyond ours in the current sub-window: `table` is `c` or `a`.
  const lowered = (table: SQL, window: 'minute' | 'day', limit: number, remaining: SQL) => {
    const w = window === 'minute' ? minute : day;
    const counts = sql`${table}.${sql.raw(`budget_${window}_counts`)}`;
    const at = sql`${table}.${sql.raw(`budget_${window}_at`)}`;
    const now = subWindowAt(w);
    return sql`${sql.raw(`budget_${window}_counts`)} = CASE WHEN ${remaining} IS NULL THEN ${counts}
          ELSE xero_window_add(${counts}, ${at}, ${now}, ${w.n},
                               (${limit} - ${remaining}) - xero_window_used(${counts}, ${at}, ${now})) END,
        ${sql.raw(`budget_${window}_at`)} = CASE WHEN ${remaining} IS NULL THEN ${at} ELSE greatest(${at}, ${now}) END`;
  };
  const appRemaining = sql`${app?.appMinRemaining ?? null}::int`;
  await db.execute(sql`
    WITH held AS (
      SELECT c.id FROM xero_connections c WHERE c.id = ANY(${column((s) => s.connectionId)}::uuid[])
      ORDER BY c.id FOR UPDATE),
    tenant_signals AS (
      UPDATE xero_connections AS c SET
        min_remaining = coalesce(v.min_remaining, c.min_remaining),
        day_remaining = coalesce(v.day_remaining, c.day_remaining),
        limits_seen_at = now(),
        parked_until = CASE WHEN v.park_ms IS NULL THEN c.parked_until
                            ELSE greatest(c.parked_until, now() + v.park_ms * interval '1 millisecond') END,
        ${lowered(sql`c`, 'minute', budget.perMinute, sql`v.min_remaining`)},
        ${lowered(sql`c`, 'day', budget.perDay, sql`v.day_remaining`)}
      FROM unnest(
        ${column((s) => s.connectionId)}::uuid[],
        ${column((s) => s.minRemaining)}::int[],
        ${column((s) => s.dayRemaining)}::int[],
        ${column((s) => (s.parkForMs === null ? null : Math.max(0, Math.round(s.parkForMs))))}::bigint[]
      ) AS v(id, min_remaining, day_remaining, park_ms) LEFT JOIN (SELECT count(*) AS n FROM held) locked ON true
      WHERE c.id = v.id
      RETURNING 1),
    app_signals AS (
      UPDATE xero_app_limits AS a SET
        app_min_remaining = coalesce(${appRemaining}, a.app_min_remaining),
        paused_until = CASE WHEN ${app?.pausedForMs ?? null}::bigint IS NULL THEN a.paused_until
                            ELSE greatest(a.paused_until, now() + ${app?.pausedForMs ?? null}::bigint * interval '1 millisecond') END,
        ${lowered(sql`a`, 'minute', budget.appPerMinute, appRemaining)},
        updated_at = now()
      WHERE a.id = 'app' AND ${app !== null} AND (SELECT count(*) FROM tenant_signals) >= 0
      RETURNING 1)
    SELECT (SELECT count(*) FROM tenant_signals) AS tenants, (SELECT count(*) FROM app_signals) AS app`);
}
