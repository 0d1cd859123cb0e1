import type { Database } from '@honest-health/platform';
import { sql } from 'drizzle-orm';
import { rowsOf } from '../push/rows.js';
import type { PushStatus } from '../schema.js';
import { invoiceEventData, outbox } from '../webhooks/outbox.js';
import type { PushRow } from './store.js';

// Retry and cancel: each transition is one statement, so it runs over Neon's HTTP driver too, and each
// is decided on the row's latest version. The claim locks the pushes it takes (FOR UPDATE SKIP LOCKED)
// and writes their lease in the same statement; an UPDATE here that waited for that lock re-checks its
// WHERE on the leased row and changes nothing, and a row changed here first is no longer due for the
// claim, which re-checks `status` the same way. So a cancelled push is never claimed, and a push is never
// requeued while a tick holds it.

/** Why a push cannot take the transition: its status, or `in_flight` / `in_doubt`. */
export type BlockedState = PushStatus | 'in_flight' | 'in_doubt';

export type ControlOutcome =
  | { kind: 'changed'; push: PushRow }
  /** A retry replayed under an Idempotency-Key already used for this push, or a cancel of a cancelled push. */
  | { kind: 'unchanged'; push: PushRow }
  | { kind: 'blocked'; state: BlockedState; push: PushRow }
  /** The Idempotency-Key retried another push. */
  | { kind: 'key_conflict' }
  | { kind: 'not_found' };

const returned = sql`p.id, p.status, p.idempotency_key AS "idempotencyKey", p.request_hash AS "requestHash",
  p.payload, p.attempts, p.next_attempt_at AS "nextAttemptAt", p.last_error AS "lastError",
  p.xero_invoice_id AS "xeroInvoiceId", p.tenant_id AS "tenantId", p.created_at AS "createdAt",
  p.updated_at AS "updatedAt", p.created_at::text AS "cursorAt"`;

/** A tick holds the push: its lease is live, so a call to Xero may be under way. */
const leased = sql`(p.lease_expires_at IS NOT NULL AND p.lease_expires_at >= now())`;

/**
 * An attempt under the current key may have created the invoice: the tick's own record, or an attempt
 * by a release before that record existed (first key, attempted, no send recorded; docs/ticks.md).
 */
const mayHaveCreated = sql`(p.xero_in_doubt OR (p.xero_key_generation = 0 AND p.xero_key_sent_at IS NULL AND p.attempts > 0))`;

interface Row extends PushRow {
  leased: boolean | null;
  in_doubt: boolean | null;
  key_push: string | null;
}

const toDates = (row: PushRow): PushRow => ({
  ...row,
  nextAttemptAt: new Date(row.nextAttemptAt),
  createdAt: new Date(row.createdAt),
  updatedAt: new Date(row.updatedAt),
});

/** The push as it is now, with what a refused transition is decided on. */
async function current(
  db: Database,
  organizationId: string,
  id: string,
  key?: string,
): Promise<Row | undefined> {
  const [row] = rowsOf<Row>(
    await db.execute(sql`
      SELECT ${returned}, ${leased} AS leased, ${mayHaveCreated} AS in_doubt,
             ${
               key === undefined
                 ? sql`NULL::uuid`
                 : sql`(SELECT r.push_id FROM invoice_push_retries r
               WHERE r.organization_id = ${organizationId} AND r.idempotency_key = ${key})`
             } AS key_push
      FROM (SELECT 1) one
      LEFT JOIN invoice_pushes p ON p.organization_id = ${organizationId} AND p.id = ${id}`),
  );
  return row;
}

/**
 * Requeues a `dead` or `failed` push (a failed one skips its back-off), with its attempts counted
 * afresh. Under Xero's key window: when no attempt under the current key may have created the invoice,
 * the next send uses the next key (generation + 1: Xero would replay whatever it cached under the old
 * one); when one may have, the key and its doubt stay, so the claim sends under the same key while
 * Xero still holds it and looks the invoice up by its marker after, before any new key (lookup before
 * resend). A release that recorded no sends gets the doubt it implies, from the push's creation.
 *
 * The Idempotency-Key is recorded in the same statement, only when the retry happens; a replay
 * answers with the push as it is now.
 */
export async function retryPush(
  db: Database,
  organizationId: string,
  id: string,
  key: string,
): Promise<ControlOutcome> {
  const [changed] = rowsOf<PushRow>(
    await db.execute(sql`
      WITH changed AS (
        UPDATE invoice_pushes p SET
          status = 'queued',
          -- A settled push let go of its connection; its tenant names the books it goes back to.
          connection_id = coalesce(p.connection_id, (
            SELECT c.id FROM xero_connections c
            WHERE c.tenant_id = p.tenant_id AND c.organization_id = p.organization_id)),
          attempts = 0,
          next_attempt_at = now(),
          last_error = NULL,
          lease_owner = NULL,
          lease_expires_at = NULL,
          xero_key_generation = CASE WHEN ${mayHaveCreated} THEN p.xero_key_generation ELSE p.xero_key_generation + 1 END,
          xero_key_sent_at = CASE WHEN ${mayHaveCreated} THEN coalesce(p.xero_key_sent_at, p.created_at) ELSE NULL END,
          xero_in_doubt = ${mayHaveCreated},
          updated_at = now()
        WHERE p.organization_id = ${organizationId} AND p.id = ${id}
          AND p.status IN ('dead', 'failed') AND NOT ${leased}
          AND NOT EXISTS (SELECT 1 FROM invoice_push_retries r
                          WHERE r.organization_id = ${organizationId} AND r.idempotency_key = ${key})
        RETURNING p.*),
      recorded AS (
        INSERT INTO invoice_push_retries (organization_id, idempotency_key, push_id)
        SELECT ${organizationId}, ${key}, id FROM changed
        ON CONFLICT DO NOTHING
        RETURNING push_id)
      SELECT ${returned} FROM changed p WHERE (SELECT count(*) FROM recorded) >= 0`),
  );
  if (changed) return { kind: 'changed', push: toDates(changed) };
  // Nothing changed: say why, from the latest committed state (a concurrent retry under the same key
  // that won is seen here as a replay).
  const row = await current(db, organizationId, id, key);
  if (row?.key_push) {
    return row.key_push === id && row.id
      ? { kind: 'unchanged', push: toDates(row) }
      : { kind: 'key_conflict' };
  }
  if (!row?.id) return { kind: 'not_found' };
  if (row.leased && (row.status === 'queued' || row.status === 'failed')) {
    return { kind: 'blocked', state: 'in_flight', push: toDates(row) };
  }
  return { kind: 'blocked', state: row.status, push: toDates(row) };
}

/**
 * Cancels a push nothing may have sent to Xero: `queued`, `failed` or `awaiting_connection`, not held by
 * a tick, and with no attempt under its key that may have created the invoice. The lease owner is
 * cleared too, so a tick whose lease already expired cannot settle over the cancel.
 */
export async function cancelPush(db: Database, organizationId: string, id: string): Promise<ControlOutcome> {
  const [changed] = rowsOf<PushRow>(
    await db.execute(sql`
      WITH changed AS (
        UPDATE invoice_pushes p SET
          status = 'cancelled',
          lease_owner = NULL,
          lease_expires_at = NULL,
          updated_at = now()
        WHERE p.organization_id = ${organizationId} AND p.id = ${id}
          AND p.status IN ('queued', 'failed', 'awaiting_connection') AND NOT ${leased} AND NOT ${mayHaveCreated}
        RETURNING p.*),
      ${outbox('cancelled', 'changed', 'invoice.cancelled', invoiceEventData)}
      SELECT ${returned} FROM changed p`),
  );
  if (changed) return { kind: 'changed', push: toDates(changed) };
  const row = await current(db, organizationId, id);
  if (!row?.id) return { kind: 'not_found' };
  const push = toDates(row);
  if (row.status === 'cancelled') return { kind: 'unchanged', push };
  const open = row.status === 'queued' || row.status === 'failed' || row.status === 'awaiting_connection';
  if (open && row.leased) return { kind: 'blocked', state: 'in_flight', push };
  if (open && row.in_doubt) return { kind: 'blocked', state: 'in_doubt', push };
  return { kind: 'blocked', state: row.status, push };
}
