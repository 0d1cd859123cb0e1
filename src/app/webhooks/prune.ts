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
  const settled = sql`d.status IN ('delivered', 'dead') AND d.created_at < ${cutoff} AND d.updated_at < ${cutoff}
    AND d.lease_owner IS NULL`;
  const deliveries = await batches(
    db,
    o,
    sql`/* webhook retention: DELETE settled webhook_deliveries */
      WITH gone AS (
        DELETE FROM webhook_deliveries d
        WHERE d.id = ANY(ARRAY(SELECT d.id FROM webhook_deliveries d WHERE ${settled}
                               ORDER BY d.created_at LIMIT ${o.batchSize} FOR UPDATE SKIP LOCKED))
          AND ${settled}
        RETURNING 1)
      SELECT count(*)::int AS n FROM gone`,
  );
  // An event goes with its last delivery; one whose endpoints were all deleted has none left either.
  const orphan = sql`e.created_at < ${cutoff}
    AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)`;
  const events = await batches(
    db,
    o,
    sql`/* webhook retention: DELETE old webhook_events */
      WITH gone AS (
        DELETE FROM webhook_events e
        WHERE e.id = ANY(ARRAY(SELECT e.id FROM webhook_events e WHERE ${orphan}
                               ORDER BY e.created_at LIMIT ${o.batchSize} FOR UPDATE SKIP LOCKED))
          AND ${orphan}
        RETURNING 1)
      SELECT count(*)::int AS n FROM gone`,
  );
  return { deliveries, events };
}

/** Runs a counting DELETE until it removes less than a batch, or maxBatches times. */
async function batches(db: Database, o: WebhookPruneOptions, statement: SQL): Promise<number> {
  let total = 0;
  for (let i = 0; i < o.maxBatches; i++) {
    const n = Number(rowsOf<{ n: number }>(await db.execute(statement))[0]?.n ?? 0);
    total += n;
    if (n < o.batchSize) break;
  }
  return total;
}
