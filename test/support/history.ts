// A tenant's history at scale, generated in one INSERT ... SELECT generate_series: settled pushes as
// this release leaves them (no connection reference, tenant_id kept), some as an earlier release left
// them (still referencing the connection), and a few open ones.
import type pg from 'pg';

export interface HistoryOptions {
  organizationId: string;
  connectionId: string;
  tenantId: string;
  /** Settled pushes without a connection reference; one in 50 is dead, the rest pushed. */
  settled: number;
  /** Settled pushes that still reference the connection (written before settling let go of it). */
  settledReferencing: number;
  /** Queued pushes of the connection. */
  open: number;
}

type Queryable = Pick<pg.Pool, 'query'>;

/**
 * Seeds as the superuser with triggers off (session_replication_role = replica), so the foreign keys'
 * triggers do not look up the one organization a million times: what the rows reference exists, as
 * they are made here.
 */
export async function seedHistory(pool: Pick<pg.Pool, 'connect'>, o: HistoryOptions): Promise<void> {
  const db = await pool.connect();
  try {
    await db.query('SET session_replication_role = replica');
    const insert = (count: number, prefix: string, status: string, connection: string | null) =>
      db.query(
        `INSERT INTO invoice_pushes (organization_id, connection_id, tenant_id, idempotency_key, request_hash,
           payload, status, attempts, created_at, updated_at)
         SELECT $1, $2::uuid, $3, $4 || g, 'h', '{"contact":{"name":"History Ltd"}}'::jsonb, ${status},
           1, now() - g * interval '1 second', now() - g * interval '1 second'
         FROM generate_series(1, $5::int) g`,
        [o.organizationId, connection, o.tenantId, prefix, count],
      );
    await insert(o.settled, 'settled-', `CASE WHEN g % 50 = 0 THEN 'dead' ELSE 'pushed' END`, null);
    if (o.settledReferencing > 0) await insert(o.settledReferencing, 'old-', `'pushed'`, o.connectionId);
    if (o.open > 0) await insert(o.open, 'open-', `'queued'`, o.connectionId);
    await db.query('RESET session_replication_role');
    await db.query('ANALYZE invoice_pushes');
    db.release();
  } catch (error) {
    // Not back into the pool with its triggers off.
    db.release(true);
    throw error;
  }
}

/** Rows of invoice_pushes written (inserted or updated) by transactions after `xid` (txid_current()). */
export async function rowsWrittenSince(db: Queryable, xid: bigint): Promise<number> {
  // A fresh cluster is far from wraparound: a row's 32-bit xmin compares with the low bits of the xid.
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM invoice_pushes WHERE (xmin::text)::bigint > $1',
    [(xid % 4294967296n).toString()],
  );
  return rows[0]?.n ?? 0;
}

export async function currentXid(db: Queryable): Promise<bigint> {
  const { rows } = await db.query<{ x: string }>('SELECT txid_current()::text AS x');
  return BigInt(rows[0]?.x ?? '0');
}
