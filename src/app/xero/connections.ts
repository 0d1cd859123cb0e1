import { and, eq, sql } from 'drizzle-orm';
import type { Database } from '../../platform/db/types.js';
import type { SecretBox } from '../../platform/secret-box.js';
import { invoicePushes, xeroConnections } from '../schema.js';
import type { TokenSet } from './client.js';

// Tokens are sealed with associated data naming their row and column, so a ciphertext moved to
// another connection (or from the access to the refresh column) does not decrypt.
export const tokenContext = (organizationId: string, tenantId: string, column: 'access' | 'refresh') =>
  `xero:${organizationId}:${tenantId}:${column}`;

export interface NewConnection {
  organizationId: string;
  tenantId: string;
  tenantName: string | null;
  tokens: TokenSet;
}

/**
 * Stores (or re-authorises) a connection and queues the organization's invoices that were waiting
 * for one. Re-authorising bumps token_version so no in-flight refresh can overwrite the new tokens.
 */
export async function saveConnection(db: Database, box: SecretBox, input: NewConnection): Promise<string> {
  const { organizationId, tenantId, tokens } = input;
  const sealed = {
    accessTokenEnc: await box.seal(tokens.accessToken, tokenContext(organizationId, tenantId, 'access')),
    refreshTokenEnc: await box.seal(tokens.refreshToken, tokenContext(organizationId, tenantId, 'refresh')),
    accessExpiresAt: tokens.expiresAt,
  };
  const [row] = await db
    .insert(xeroConnections)
    .values({ organizationId, tenantId, tenantName: input.tenantName, ...sealed })
    .onConflictDoUpdate({
      target: [xeroConnections.organizationId, xeroConnections.tenantId],
      set: {
        ...sealed,
        tenantName: input.tenantName,
        status: 'active',
        tokenVersion: sql`${xeroConnections.tokenVersion} + 1`,
        refreshLeaseOwner: null,
        refreshLeaseExpiresAt: null,
        updatedAt: sql`now()`,
      },
    })
    .returning({ id: xeroConnections.id });
  if (!row) throw new Error('saving the connection returned no row');
  await db
    .update(invoicePushes)
    .set({ status: 'queued', connectionId: row.id, nextAttemptAt: sql`now()`, updatedAt: sql`now()` })
    .where(
      and(eq(invoicePushes.organizationId, organizationId), eq(invoicePushes.status, 'awaiting_connection')),
    );
  return row.id;
}
