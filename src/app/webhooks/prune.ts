import type { Database } from '@honest-health/platform';
import { type SQL, sql } from 'drizzle-orm';
import { rowsOf } from '../push/rows.js';

// Webhook retention (WEBHOOK_RETENTION_DAYS, 30 by default): deletes delivered and dead deliveries made and
// last changed more than the retention ago, then events older than it with no delivery left, in bounded
// batches so a first run over a large backlog never holds one long transaction. A delivery still to be
// sent (pending, failed) or leased is never touched: the status list and the lease are in the DELETE's
// own WHERE too, so a row resent in between is left alone; and SKIP LOCKED lets replicas prune at once.

export interface WebhookPruneOptions {
  retentionDays: number;
  /** Rows per DELETE statement. */
  batchSize: number;
  /** DELETE statements per table per run. */
  maxBatches: number;
}

export interface WebhookPruneResult {
  deliveries: number;
  events: number;
}

export async function pruneWebhooks(db: Database, o: WebhookPruneOptions): Promise<WebhookPruneResult> {
  const cutoff = sql`now() - ${o.retentionDays} * interval '1 day'`;
  // created_at is what webhook_deliveries_settled_idx orders; updated_at (when it settled) must be as old.
  const deliveries = await prune(
    db,
    o,
    'webhook_deliveries',
    sql`status IN ('delivered', 'dead') AND created_at < ${cutoff} AND updated_at < ${cutoff} AND lease_owner IS NULL`,
  );
  // An event goes with its last delivery; one whose endpoints were all deleted has none left either.
  const events = await prune(
    db,
    o,
    'webhook_events',
    sql`created_at < ${cutoff} AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = t.id)`,
  );
  return { deliveries, events };
}

/**
 * Deletes the oldest rows of `table` (aliased `t`) matching `where`, a batch a statement, until a batch
 * comes back short or maxBatches ran. `where` is checked again on the row the DELETE removes.
 */
async function prune(db: Database, o: WebhookPruneOptions, table: string, where: SQL): Promise<number> {
  const t = sql.identifier(table);
  let total = 0;
  for (let i = 0; i < o.maxBatches; i++) {
    const rows = rowsOf<{ n: number }>(
      await db.execute(sql`WITH gone AS (
        DELETE FROM ${t} t WHERE t.id = ANY(ARRAY(SELECT t.id FROM ${t} t WHERE ${where}
          ORDER BY t.created_at LIMIT ${o.batchSize} FOR UPDATE SKIP LOCKED)) AND ${where}
        RETURNING 1)
      SELECT count(*)::int AS n FROM gone`),
    );
    const n = Number(rows[0]?.n ?? 0);
    total += n;
    if (n < o.batchSize) break;
  }
  return total;
}
