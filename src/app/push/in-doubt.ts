import type { Database } from '@honest-health/platform';
import { sql } from 'drizzle-orm';
import { rowsOf } from './rows.js';

/**
 * Written before the batch's sends, in one statement fenced on the lease: each push's key is marked
 * as sent (its first send's time kept) and in doubt, with the marker its invoice carries. A tick that
 * dies after Xero answered and before the settle so leaves a row that says a send may have created
 * the invoice, and when: the retry keeps the key inside Xero's window and looks the invoice up after
 * it. Returns the ids still leased to `owner` (only those are sent). The owner is a column of each
 * row, not a constant, for the planner's sake (see settle.ts).
 */
export async function markSending(
  db: Database,
  owner: string,
  sends: readonly { id: string; marker: string }[],
): Promise<Set<string>> {
  if (sends.length === 0) return new Set();
  const rows = rowsOf<{ id: string }>(
    await db.execute(sql`
      UPDATE invoice_pushes AS p SET
        xero_key_sent_at = coalesce(p.xero_key_sent_at, now()),
        xero_in_doubt = true,
        xero_marker = coalesce(p.xero_marker, v.marker)
      FROM unnest(
        ${sql.param(sends.map((s) => s.id))}::uuid[],
        ${sql.param(sends.map((s) => s.marker))}::text[],
        ${sql.param(sends.map(() => owner))}::text[]
      ) AS v(id, marker, owner)
      WHERE p.id = v.id AND p.lease_owner = v.owner AND p.id = ANY(${sql.param(sends.map((s) => s.id))}::uuid[])
      RETURNING p.id`),
  );
  return new Set(rows.map((r) => r.id));
}
