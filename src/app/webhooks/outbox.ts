import { type SQL, sql } from 'drizzle-orm';

export const WEBHOOK_EVENTS = [
  'invoice.pushed',
  'invoice.dead',
  'invoice.cancelled',
  'connection.needs_reauth',
  'connection.disconnected',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENTS)[number];

/**
 * CTEs that record an event for each row of `source` (a CTE of the statement making the change, with
 * `organization_id`), and one delivery per endpoint of its organization not disabled: appended to that
 * statement's WITH, so the event commits, or rolls back, with the change. `data` reads `source`'s
 * columns as `s.<column>`.
 *
 * An organization with no endpoint enabled gets no event: nothing would ever read it (an event is
 * reached only through its deliveries, made here or never), and the push tick would otherwise write
 * one row, its two index entries and its foreign-key check for every invoice pushed. The endpoints are
 * read from the same snapshot as the fan-out, so which changes get deliveries is as before.
 */
export function outbox(name: string, source: string, type: WebhookEventType, data: SQL): SQL {
  const event = sql.identifier(`${name}_event`);
  const fanout = sql.identifier(`${name}_fanout`);
  return sql`${event} AS (
      INSERT INTO webhook_events (organization_id, type, data)
      SELECT s.organization_id, ${type}, ${data} FROM ${sql.identifier(source)} s
      WHERE EXISTS (SELECT 1 FROM webhook_endpoints w
                    WHERE w.organization_id = s.organization_id AND w.disabled_at IS NULL)
      RETURNING id, organization_id),
    ${fanout} AS (
      INSERT INTO webhook_deliveries (event_id, endpoint_id)
      SELECT e.id, w.id FROM ${event} e
      JOIN webhook_endpoints w ON w.organization_id = e.organization_id AND w.disabled_at IS NULL
      RETURNING 1)`;
}

/** What an invoice event carries: the invoice as a list item shows it. */
export const invoiceEventData = sql`jsonb_build_object('id', s.id, 'status', s.status,
  'idempotencyKey', s.idempotency_key, 'tenantId', s.tenant_id, 'xeroInvoiceId', s.xero_invoice_id,
  'lastError', s.last_error)`;

/** What a connection event carries. */
export const connectionEventData = sql`jsonb_build_object('id', s.id, 'tenantId', s.tenant_id,
  'tenantName', s.tenant_name, 'reason', s.reason)`;
