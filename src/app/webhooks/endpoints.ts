import type { Database } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import { sql } from 'drizzle-orm';
import { rowsOf } from '../push/rows.js';
import { newSigningSecret } from './sign.js';

/** The associated data an endpoint's secrets are sealed under: a secret moved to another row does not open. */
export const secretContext = (endpointId: string) => `webhook-endpoint:${endpointId}`;

export interface EndpointRow {
  id: string;
  url: string;
  disabledAt: Date | null;
  disabledReason: string | null;
  createdAt: Date;
}

const view = sql`id, url, disabled_at AS "disabledAt", disabled_reason AS "disabledReason", created_at AS "createdAt"`;

/** Registers an endpoint (its URL already checked); returns it with its secret, shown this once. */
export async function createEndpoint(
  db: Database,
  box: SecretBox,
  organizationId: string,
  url: string,
): Promise<EndpointRow & { secret: string }> {
  const id = crypto.randomUUID();
  const secret = newSigningSecret();
  const sealed = await box.seal(secret, secretContext(id));
  const [row] = rowsOf<EndpointRow>(
    await db.execute(sql`
      INSERT INTO webhook_endpoints (id, organization_id, url, secret_enc)
      VALUES (${id}, ${organizationId}, ${url}, ${sealed}) RETURNING ${view}`),
  );
  if (!row) throw new Error('no endpoint inserted');
  return { ...row, secret };
}

export async function listEndpoints(db: Database, organizationId: string): Promise<EndpointRow[]> {
  return rowsOf<EndpointRow>(
    await db.execute(sql`SELECT ${view} FROM webhook_endpoints WHERE organization_id = ${organizationId}
      ORDER BY created_at, id`),
  );
}

export async function deleteEndpoint(db: Database, organizationId: string, id: string): Promise<boolean> {
  const rows = rowsOf(
    await db.execute(sql`DELETE FROM webhook_endpoints WHERE organization_id = ${organizationId} AND id = ${id}
      RETURNING id`),
  );
  return rows.length > 0;
}

/** Changes the URL (already checked) and/or re-enables a disabled endpoint. */
export async function updateEndpoint(
  db: Database,
  organizationId: string,
  id: string,
  change: { url?: string; enable?: boolean },
): Promise<EndpointRow | undefined> {
  const [row] = rowsOf<EndpointRow>(
    await db.execute(sql`
      UPDATE webhook_endpoints SET
        url = coalesce(${change.url ?? null}::text, url),
        disabled_at = CASE WHEN ${change.enable === true} THEN NULL ELSE disabled_at END,
        disabled_reason = CASE WHEN ${change.enable === true} THEN NULL ELSE disabled_reason END,
        updated_at = now()
      WHERE organization_id = ${organizationId} AND id = ${id}
      RETURNING ${view}`),
  );
  return row;
}

/**
 * A new secret, shown once; the current one becomes the previous and keeps signing (both signatures
 * in `webhook-signature`) for `overlapMs`, so receivers can switch without dropping a delivery.
 */
export async function rotateSecret(
  db: Database,
  box: SecretBox,
  organizationId: string,
  id: string,
  overlapMs: number,
): Promise<(EndpointRow & { secret: string; previousSecretExpiresAt: Date }) | undefined> {
  const secret = newSigningSecret();
  const sealed = await box.seal(secret, secretContext(id));
  const [row] = rowsOf<EndpointRow & { previousSecretExpiresAt: Date }>(
    await db.execute(sql`
      UPDATE webhook_endpoints SET previous_secret_enc = secret_enc, secret_enc = ${sealed},
        previous_secret_expires_at = now() + ${overlapMs} * interval '1 millisecond', updated_at = now()
      WHERE organization_id = ${organizationId} AND id = ${id}
      RETURNING ${view}, previous_secret_expires_at AS "previousSecretExpiresAt"`),
  );
  return row && { ...row, secret };
}

export interface DeliveryLogRow {
  id: string;
  eventId: string;
  type: string;
  status: string;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  nextAttemptAt: Date | null;
  deliveredAt: Date | null;
  createdAt: Date;
  /** created_at as Postgres's text, to the microsecond: the keyset cursor (a Date would round it). */
  cursorAt: string;
}

/**
 * A page of the endpoint's deliveries, newest first, after the cursor `(at, id)` when given (keyset, on
 * webhook_deliveries_endpoint_log_idx); undefined when there is no such endpoint.
 */
export async function listDeliveries(
  db: Database,
  organizationId: string,
  endpointId: string,
  page: { limit: number; after?: { at: string; id: string } | undefined },
): Promise<DeliveryLogRow[] | undefined> {
  const after = page.after
    ? sql`AND (d.created_at, d.id) < (${page.after.at}::timestamptz, ${page.after.id}::uuid)`
    : sql``;
  const rows = rowsOf<DeliveryLogRow & { found: boolean }>(
    await db.execute(sql`
      SELECT w.id IS NOT NULL AS found, d.id, d.event_id AS "eventId", e.type, d.status, d.attempts,
             d.last_status AS "lastStatus", d.last_error AS "lastError",
             CASE WHEN d.status IN ('pending', 'failed') THEN d.next_attempt_at END AS "nextAttemptAt",
             d.delivered_at AS "deliveredAt", d.created_at AS "createdAt", d.created_at::text AS "cursorAt"
      FROM (SELECT 1) one
      LEFT JOIN webhook_endpoints w ON w.organization_id = ${organizationId} AND w.id = ${endpointId}
      LEFT JOIN LATERAL (SELECT * FROM webhook_deliveries d WHERE d.endpoint_id = w.id ${after}
                         ORDER BY d.created_at DESC, d.id DESC LIMIT ${page.limit}) d ON true
      LEFT JOIN webhook_events e ON e.id = d.event_id
      ORDER BY d.created_at DESC, d.id DESC`),
  );
  if (!rows[0]?.found) return undefined;
  return rows.filter((r) => r.id !== null).map(({ found: _found, ...r }) => r);
}

/** Queues one delivery again, now, with its attempts afresh; not while a tick holds it. */
export async function resendDelivery(
  db: Database,
  organizationId: string,
  endpointId: string,
  deliveryId: string,
): Promise<'queued' | 'in_flight' | 'not_found'> {
  const rows = rowsOf<{ queued: boolean }>(
    await db.execute(sql`
      WITH target AS (
        SELECT d.id, (d.lease_expires_at IS NOT NULL AND d.lease_expires_at >= now()) AS leased
        FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
        WHERE w.organization_id = ${organizationId} AND w.id = ${endpointId} AND d.id = ${deliveryId}),
      queued AS (
        UPDATE webhook_deliveries d SET status = 'pending', attempts = 0, next_attempt_at = now(),
          lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
        FROM target t WHERE d.id = t.id AND NOT t.leased
          AND (d.lease_expires_at IS NULL OR d.lease_expires_at < now())
        RETURNING d.id)
      SELECT EXISTS (SELECT 1 FROM queued) AS queued FROM target`),
  );
  if (!rows[0]) return 'not_found';
  return rows[0].queued ? 'queued' : 'in_flight';
}
