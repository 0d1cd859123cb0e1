import { type SQL, sql } from 'drizzle-orm';

/**
 * `p.connection_id` equal to `connection`, written as a range of one value, for a connection's due
 * pushes read in (connection_id, next_attempt_at) order. An equality lets the planner drop
 * connection_id from that order and walk invoice_pushes_due_idx (or scan
 * invoice_pushes_org_pending_idx) through every connection's due pushes, expecting this connection's
 * to be spread evenly among them; beside a large history it did, when a tenant's pushes came after the
 * others' (docs/xero-budget.md). With the range only invoice_pushes_connection_due_idx yields that
 * order without reading and sorting every due push, and its leading column still bounds the scan when
 * statistics are stale.
 */
export const ofConnection = (connection: SQL) =>
  sql`p.connection_id >= ${connection} AND p.connection_id <= ${connection}`;
