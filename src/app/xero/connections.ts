import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Database } from '../../platform/db/types.js';
import type { SecretBox } from '../../platform/secret-box.js';
import { invoicePushes, xeroConnections } from '../schema.js';
import type { TokenSet } from './client.js';

// Tokens are sealed with associated data naming their row and column, so a ciphertext moved to
// another connection (or from the access to the refresh column) does not decrypt.
export const tokenContext = (organizationId: string, tenantId: string, column: 'access' | 'refresh') =>
  `xero:${organizationId}:${tenantId}:${column}`;

/**
 * Decrypted access tokens by connection and token_version, for the push tick. Every write of
 * access_token_enc bumps token_version (saveConnection below, the refresh tick's compare-and-set), so
 * an entry is never stale: a new version is a miss. Decrypting (AES-GCM through WebCrypto, plus the
 * base64) cost more CPU than everything else a push does, once per push; now it is once per version.
 * The bound keeps a process with many tenants from holding every token it ever saw.
 */
export class AccessTokenCache {
  readonly #entries = new Map<string, { version: number; token: string }>();

  constructor(private readonly maxEntries = 10_000) {}

  get(connectionId: string, version: number): string | undefined {
    const entry = this.#entries.get(connectionId);
    return entry?.version === version ? entry.token : undefined;
  }

  set(connectionId: string, version: number, token: string): void {
    if (!this.#entries.has(connectionId) && this.#entries.size >= this.maxEntries) {
      // The oldest entry goes first (a Map iterates in insertion order).
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    this.#entries.set(connectionId, { version, token });
  }
}

/**
 * The access tokens of these connections (at the token_version the caller saw): cached ones at once,
 * the others read in one statement and decrypted once each. A row now at a newer version (a refresh
 * landed in between) yields the newer token. A token that does not decrypt maps to its error, so one
 * bad row does not fail the others; a connection without a stored token is absent.
 */
export async function accessTokens(
  db: Database,
  box: SecretBox,
  cache: AccessTokenCache,
  wanted: ReadonlyMap<string, number>,
): Promise<Map<string, string | Error>> {
  const out = new Map<string, string | Error>();
  const missing: string[] = [];
  for (const [connectionId, version] of wanted) {
    const token = cache.get(connectionId, version);
    if (token === undefined) missing.push(connectionId);
    else out.set(connectionId, token);
  }
  if (missing.length === 0) return out;
  const rows = await db
    .select({
      id: xeroConnections.id,
      organizationId: xeroConnections.organizationId,
      tenantId: xeroConnections.tenantId,
      tokenVersion: xeroConnections.tokenVersion,
      accessTokenEnc: xeroConnections.accessTokenEnc,
    })
    .from(xeroConnections)
    .where(inArray(xeroConnections.id, missing));
  await Promise.all(
    rows.map(async (row) => {
      if (!row.accessTokenEnc) return;
      try {
        const token = await box.open(
          row.accessTokenEnc,
          tokenContext(row.organizationId, row.tenantId, 'access'),
        );
        cache.set(row.id, row.tokenVersion, token);
        out.set(row.id, token);
      } catch (err) {
        out.set(row.id, err instanceof Error ? err : new Error(String(err)));
      }
    }),
  );
  return out;
}

export interface NewConnection {
  organizationId: string;
  tenantId: string;
  tenantName: string | null;
  tokens: TokenSet;
}

/**
 * Stores (or re-authorises) a connection and queues the organization's invoices that were waiting
 * for one. Re-authorising bumps token_version so no in-flight refresh can overwrite the new tokens
 * (and so the push tick's AccessTokenCache lets go of the old access token).
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
