import type { Database } from '@honest-health/platform';
import { sql } from 'drizzle-orm';
import { rowsOf } from './rows.js';

// A settled push (pushed, dead) keeps no reference to its connection: settling clears it (settle.ts),
// and this clears it in rows settled before that, or by the previous release, in bounded batches. So
// a disconnect's ON DELETE SET NULL meets the open pushes only, never the tenant's history; tenant_id
// keeps where each went. The rows' updated_at is left alone: retention reads it.

/**
 * How long the sweep rests after a pass that found nothing to detach. Such a pass reads every open push
 * through invoice_pushes_connection_idx, or the whole table beside a large history (the planner's
 * estimate of settled rows that still reference a connection comes from a sample), and only a release
 * that predates settle's clearing writes new ones, while a rolling deploy runs it beside this one.
 */
export const DETACH_REST_MS = 10 * 60_000;

/**
 * detachSettledPushes, run by a tick: every run while it finds rows, then at most once per `restMs`
 * after a pass that found none.
 */
export function restingDetach(restMs = DETACH_REST_MS, now: () => number = Date.now) {
  let restUntil = 0;
  return async (db: Database): Promise<{ detached: number }> => {
    if (now() < restUntil) return { detached: 0 };
    const result = await detachSettledPushes(db);
    restUntil = result.detached === 0 ? now() + restMs : 0;
    return result;
  };
}

export async function detachSettledPushes(
  db: Database,
  { batchSize = 1000, maxBatches = 10 } = {},
): Promise<{ detached: number }> {
  let detached = 0;
  for (let i = 0; i < maxBatches; i++) {
    const settled = sql`p.connection_id IS NOT NULL AND p.status IN ('pushed', 'dead') AND p.lease_owner IS NULL`;
    const rows = rowsOf<{ n: number }>(
      await db.execute(sql`
        WITH detached AS (
          -- The tenant is kept first (a push an older release routed may not carry it): a retry finds
          -- its books again by it.
          UPDATE invoice_pushes p SET connection_id = NULL,
            tenant_id = coalesce(p.tenant_id, (SELECT c.tenant_id FROM xero_connections c WHERE c.id = p.connection_id))
          WHERE p.id = ANY(ARRAY(SELECT p.id FROM invoice_pushes p WHERE ${settled}
                                 LIMIT ${batchSize} FOR UPDATE SKIP LOCKED))
            AND ${settled}
          RETURNING 1)
        SELECT count(*)::int AS n FROM detached`),
    );
    const n = Number(rows[0]?.n ?? 0);
    detached += n;
    if (n < batchSize) break;
  }
  return { detached };
}
