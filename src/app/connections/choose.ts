import type { Database } from '@honest-health/platform';
import { and, eq, sql } from 'drizzle-orm';
import { organizations, xeroConnections, xeroGrants } from '../schema.js';

// The organization chooses the books its invoices go to: a connection starts unchosen and
// receives nothing; choosing it lets `tenantId` name it, making it the default sends every invoice
// without `tenantId` to it. Each step is one statement (pg, PGlite and Neon over HTTP alike).

export const connectionView = {
  id: xeroConnections.id,
  tenantId: xeroConnections.tenantId,
  tenantName: xeroConnections.tenantName,
  status: xeroConnections.status,
  // A grant whose refresh is failing (its token does not open, Xero unreachable) says why here too.
  statusReason: sql<string | null>`coalesce(${xeroConnections.statusReason}, ${xeroGrants.refreshError})`,
  grantId: xeroConnections.grantId,
  chosen: xeroConnections.chosen,
  default: sql<boolean>`coalesce(${organizations.defaultConnectionId} = ${xeroConnections.id}, false)`,
  createdAt: xeroConnections.createdAt,
};

export function listConnections(db: Database, organizationId: string) {
  return db
    .select(connectionView)
    .from(xeroConnections)
    .innerJoin(organizations, eq(organizations.id, xeroConnections.organizationId))
    .leftJoin(xeroGrants, eq(xeroGrants.id, xeroConnections.grantId))
    .where(eq(xeroConnections.organizationId, organizationId))
    .orderBy(xeroConnections.createdAt, xeroConnections.id);
}

async function viewOf(db: Database, organizationId: string, id: string) {
  const [row] = await db
    .select(connectionView)
    .from(xeroConnections)
    .innerJoin(organizations, eq(organizations.id, xeroConnections.organizationId))
    .leftJoin(xeroGrants, eq(xeroGrants.id, xeroConnections.grantId))
    .where(and(eq(xeroConnections.id, id), eq(xeroConnections.organizationId, organizationId)));
  return row;
}

/**
 * Marks the connection chosen (and, with `asDefault`, the organization's default), then queues the
 * pushes that waited for it: the connection's view, and how many pushes it queued. Undefined: no such
 * connection of this organization.
 */
export async function chooseConnection(db: Database, organizationId: string, id: string, asDefault: boolean) {
  const [chosen] = await db
    .update(xeroConnections)
    .set({ chosen: true, updatedAt: sql`now()` })
    .where(and(eq(xeroConnections.id, id), eq(xeroConnections.organizationId, organizationId)))
    .returning({ id: xeroConnections.id });
  if (!chosen) return undefined;
  if (asDefault) {
    // Waits for ingress inserts holding the organization's row FOR SHARE (store.ts), so the binding
    // below, a later statement, sees every push that found no default.
    await db
      .update(organizations)
      .set({ defaultConnectionId: id })
      .where(eq(organizations.id, organizationId));
  }
  // Pushes bound to this connection that waited for it to be chosen (a tenant connected again), and,
  // for a default, those never routed; a push routed to another tenant is never taken. The push tick
  // sends them; a connection that cannot push now (needs_reauth) keeps them waiting for its reconnect.
  const bound = await db.execute(sql`
    UPDATE invoice_pushes p SET connection_id = c.id, tenant_id = c.tenant_id, updated_at = now(),
      status = CASE WHEN c.status = 'active' THEN 'queued' ELSE 'awaiting_connection' END,
      next_attempt_at = now(),
      last_error = CASE WHEN c.status = 'active' THEN NULL ELSE coalesce(c.status_reason, p.last_error) END
    FROM xero_connections c
    WHERE c.id = ${id} AND p.organization_id = ${organizationId} AND p.status = 'awaiting_connection'
      AND (p.connection_id = c.id
           OR (${asDefault} AND p.connection_id IS NULL AND p.tenant_id IS NULL))
    RETURNING p.status`);
  const statuses = (bound as unknown as { rows: { status: string }[] }).rows;
  const view = await viewOf(db, organizationId, id);
  return view && { view, queued: statuses.filter((r) => r.status === 'queued').length };
}
