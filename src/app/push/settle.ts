import type { Database } from '@honest-health/platform';
import { sql } from 'drizzle-orm';
import { invoiceEventData, outbox } from '../webhooks/outbox.js';
import type { BudgetGrant } from './claim.js';
import { executeNamed } from './named.js';
import { slotsRemove, windowRemove } from './window-sql.js';

/** What a push's row becomes; absent fields keep their value. */
export interface Settlement {
  id: string;
  status?: 'pushed' | 'failed' | 'dead' | 'awaiting_connection';
  retryInMs?: number;
  attempts?: number;
  lastError?: string;
  xeroInvoiceId?: string;
  /** Whether an attempt under the current Idempotency-Key may have created the invoice. */
  inDoubt?: boolean;
  /**
   * `new`: a lookup found no invoice, so the next send uses the next key (generation + 1, not yet
   * sent, not in doubt). `unsent`: the key marked as sent before the call was not sent after all.
   */
  key?: 'new' | 'unsent';
  /** The tenant of the push's connection as the claim read it: kept where the row has none, unlooked-up. */
  tenantId?: string | null;
}

/**
 * Records the batch's outcomes in one statement, fenced on the lease: a push whose lease expired and
 * was taken by another replica is left to that replica. The owner travels as a column of each row, not
 * as one constant: compared with a constant, `lease_owner` (NULL in almost every row when statistics
 * were taken) looks like it matches one row, and the planner then rescans the whole unnest() once
 * per row it updates; as a join column it hashes them. The extra
 * `p.id = ANY(...)` lets the planner find the rows by primary key instead of scanning the table.
 *
 * The same statement gives back the budget the claim took (BudgetGrant): each tenant's slots, and the
 * counted calls that were not made (`used` says how many were), from the sub-windows they were counted
 * in (one already aged out has nothing left to give back). It locks the connection rows in id order and
 * the app's row after them (only when calls go back to it): the claim's order (claim.ts), so none
 * deadlock. A batch that dies before it settles gives nothing back: its slots expire with its leases,
 * and its counted calls with their window.
 */
export async function settlePushes(
  db: Database,
  owner: string,
  settlements: readonly Settlement[],
  grants: readonly BudgetGrant[] = [],
  used: ReadonlyMap<string, number> = new Map(),
): Promise<void> {
  for (let i = 0; i < Math.max(settlements.length, grants.length > 0 ? 1 : 0); i += SETTLE_CHUNK) {
    const chunk = settlements.slice(i, i + SETTLE_CHUNK);
    const column = <T>(pick: (s: Settlement) => T) => sql.param(chunk.map(pick));
    // The budget goes back with the first chunk: the slots, and the counted calls that were not made.
    const back = i === 0 ? grants : [];
    const grant = <T>(pick: (g: BudgetGrant) => T) => sql.param(back.map(pick));
    const unused = (g: BudgetGrant) => Math.max(0, g.granted - (used.get(g.connectionId) ?? 0));
    await executeNamed(
      db,
      'push_settle',
      sql`
      WITH held AS (
        SELECT c.id FROM xero_connections c WHERE c.id = ANY(${grant((g) => g.connectionId)}::uuid[])
        ORDER BY c.id FOR UPDATE),
      released AS (
        UPDATE xero_connections AS c SET
          budget_slots = ${slotsRemove(sql`c.budget_slots`, sql`v.slot_us`, sql`v.granted`)},
          budget_minute_counts = ${windowRemove(sql`c.budget_minute_counts`, sql`c.budget_minute_at`, sql`v.minute_at`, sql`v.unused`)},
          budget_day_counts = ${windowRemove(sql`c.budget_day_counts`, sql`c.budget_day_at`, sql`v.day_at`, sql`v.unused`)}
        FROM unnest(
          ${grant((g) => g.connectionId)}::uuid[],
          ${grant((g) => g.slotUs)}::bigint[],
          ${grant((g) => g.granted)}::int[],
          ${grant((g) => g.minuteAt)}::bigint[],
          ${grant((g) => g.dayAt)}::bigint[],
          ${grant(unused)}::int[]
        ) AS v(id, slot_us, granted, minute_at, day_at, unused)
          LEFT JOIN (SELECT count(*) AS n FROM held) locked ON true
        WHERE c.id = v.id
        RETURNING v.minute_at, v.unused),
      app_released AS (
        UPDATE xero_app_limits AS a SET
          budget_minute_counts = ${windowRemove(sql`a.budget_minute_counts`, sql`a.budget_minute_at`, sql`r.minute_at`, sql`r.unused::int`)}
        FROM (SELECT min(minute_at) AS minute_at, sum(unused) AS unused FROM released) r
        WHERE a.id = 'app' AND r.unused > 0
        RETURNING 1),
      settled AS (
      UPDATE invoice_pushes AS p SET
        status = coalesce(v.status, p.status),
        -- A settled push lets go of its connection (tenant_id keeps where it went): a disconnect then
        -- touches the open pushes only, never the tenant's history.
        connection_id = CASE WHEN coalesce(v.status, p.status) IN ('pushed', 'dead') THEN NULL
                             ELSE p.connection_id END,
        tenant_id = coalesce(p.tenant_id, v.tenant_id,
                             (SELECT c.tenant_id FROM xero_connections c WHERE c.id = p.connection_id)),
        attempts = coalesce(v.attempts, p.attempts),
        next_attempt_at = CASE WHEN v.retry_ms IS NULL THEN p.next_attempt_at
                               ELSE now() + v.retry_ms * interval '1 millisecond' END,
        xero_invoice_id = coalesce(v.xero_id, p.xero_invoice_id),
        xero_key_generation = p.xero_key_generation + CASE WHEN v.key = 'new' THEN 1 ELSE 0 END,
        xero_key_sent_at = CASE WHEN v.key IN ('new', 'unsent') THEN NULL ELSE p.xero_key_sent_at END,
        xero_in_doubt = CASE WHEN v.key = 'new' THEN false ELSE coalesce(v.in_doubt, p.xero_in_doubt) END,
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
        ${column((s) => s.inDoubt ?? null)}::boolean[],
        ${column((s) => s.key ?? null)}::text[],
        ${column(() => owner)}::text[],
        ${column((s) => s.tenantId ?? null)}::text[]
      ) AS v(id, status, attempts, retry_ms, last_error, xero_id, in_doubt, key, owner, tenant_id)
        LEFT JOIN (SELECT (SELECT count(*) FROM released) + (SELECT count(*) FROM app_released) AS n) budget ON true
      WHERE p.id = v.id AND p.lease_owner = v.owner AND p.id = ANY(${column((s) => s.id)}::uuid[])
      RETURNING p.id, p.organization_id, p.status, p.idempotency_key, p.tenant_id, p.xero_invoice_id, p.last_error),
      -- Under the lease the push was queued or failed, so these are transitions: one event each.
      pushed AS (SELECT * FROM settled WHERE status = 'pushed'),
      died AS (SELECT * FROM settled WHERE status = 'dead'),
      ${outbox('pushed', 'pushed', 'invoice.pushed', invoiceEventData)},
      ${outbox('died', 'died', 'invoice.dead', invoiceEventData)}
      SELECT count(*) FROM settled`,
    );
  }
}

// PUSH_BATCH_SIZE is at most 1000: one statement per batch.
const SETTLE_CHUNK = 1000;
