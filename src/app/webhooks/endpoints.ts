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
