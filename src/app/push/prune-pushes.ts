import type { Database } from '@honest-health/platform';
import { sql } from 'drizzle-orm';
import { rowsOf } from './rows.js';

// Retention (PUSH_RETENTION_DAYS, off by default; docs/ticks.md "Retention"): deletes settled history,
// pushed and dead pushes created and last updated more than the retention ago, in bounded batches so a first run
// over years of history never holds a long transaction. Open pushes (queued, failed, awaiting a
// connection) and leased ones are never touched: the status list and the lease are in the DELETE's own
// WHERE, not only in the batch's SELECT, so a row that changed in between is left alone.

export interface PruneOptions {
  retentionDays: number;
  /** Rows per DELETE statement. */
  batchSize: number;
  /** DELETE statements per run: a run removes at most batchSize × maxBatches rows. */
  maxBatches: number;
}

export interface PruneResult {
  pruned: number;
}

export async function prunePushes(db: Database, o: PruneOptions): Promise<PruneResult> {
  let pruned = 0;
  for (let i = 0; i < o.maxBatches; i++) {
    const cutoff = sql`now() - ${o.retentionDays} * interval '1 day'`;
    // created_at is what invoice_pushes_settled_idx orders; updated_at (when it settled) must be as old.
    const settled = sql`p.status IN ('pushed', 'dead') AND p.created_at < ${cutoff} AND p.updated_at < ${cutoff}
      AND p.lease_owner IS NULL`;
    const rows = rowsOf<{ n: number }>(
      await db.execute(sql`/* push retention: DELETE settled invoice_pushes */
        WITH gone AS (
          DELETE FROM invoice_pushes p
          WHERE p.id = ANY(ARRAY(SELECT p.id FROM invoice_pushes p WHERE ${settled}
                                 ORDER BY p.created_at LIMIT ${o.batchSize} FOR UPDATE SKIP LOCKED))
            AND ${settled}
          RETURNING 1)
        SELECT count(*)::int AS n FROM gone`),
    );
    const n = Number(rows[0]?.n ?? 0);
    pruned += n;
    if (n < o.batchSize) break;
  }
  return { pruned };
}
