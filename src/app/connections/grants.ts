import { and, inArray, ne, sql } from 'drizzle-orm';
import type { Database } from '../../platform/db/types.js';
import type { SecretBox } from '../../platform/secret-box.js';
import { xeroConnections, xeroGrants } from '../schema.js';
import type { TokenSet, XeroTenant } from '../xero/client.js';

// Tokens are sealed with associated data naming their grant and column, so a ciphertext moved to
// another grant (or from the access to the refresh column) does not decrypt. Grants migrated from
// per-tenant rows keep the context they were sealed under (`seal_context`) until their next refresh.
export const tokenContext = (
  grant: { id: string; sealContext: string | null },
  column: 'access' | 'refresh',
) => `${grant.sealContext ?? `xero-grant:${grant.id}`}:${column}`;

/**
 * Decrypted access tokens by grant and token_version, for the push tick. Every write of
 * access_token_enc bumps token_version (saveGrant below, the refresh tick's compare-and-set), so an
 * entry is never stale: a new version is a miss. Decrypting (AES-GCM through WebCrypto, plus the
 * base64) cost more CPU than everything else a push does, once per push; now it is once per version.
 * The bound keeps a process with many grants from holding every token it ever saw.
 * `hits` and `misses` count lookups over the cache's life (the push tick logs them per run): a cache
 * rebuilt for every run shows as misses only.
 */
export class AccessTokenCache {
  readonly #entries = new Map<string, { version: number; token: string }>();
  #hits = 0;
  #misses = 0;

  constructor(private readonly maxEntries = 10_000) {}

  get hits(): number {
    return this.#hits;
  }

  get misses(): number {
    return this.#misses;
  }

  get(grantId: string, version: number): string | undefined {
    const entry = this.#entries.get(grantId);
    if (entry?.version === version) {
      this.#hits += 1;
      return entry.token;
    }
    this.#misses += 1;
    return undefined;
  }

  set(grantId: string, version: number, token: string): void {
    if (!this.#entries.has(grantId) && this.#entries.size >= this.maxEntries) {
      // The oldest entry goes first (a Map iterates in insertion order).
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    this.#entries.set(grantId, { version, token });
  }
}

/**
 * The access tokens of these grants (at the token_version the caller saw): cached ones at once, the
 * others read in one statement and decrypted once each. A row now at a newer version (a refresh landed
 * in between) yields the newer token. A token that does not decrypt maps to its error, so one bad row
 * does not fail the others; a grant without a stored token is absent. `tally`, when given, counts this
 * call's cache hits and misses (exact even when callers share the cache at once).
 */
export async function accessTokens(
  db: Database,
  box: SecretBox,
  cache: AccessTokenCache,
  wanted: ReadonlyMap<string, number>,
  tally?: { hits: number; misses: number },
): Promise<Map<string, string | Error>> {
  const out = new Map<string, string | Error>();
  const missing: string[] = [];
  for (const [grantId, version] of wanted) {
    const token = cache.get(grantId, version);
    if (token === undefined) missing.push(grantId);
    else out.set(grantId, token);
  }
  if (tally) {
    tally.hits += out.size;
    tally.misses += missing.length;
  }
  if (missing.length === 0) return out;
  const rows = await db
    .select({
      id: xeroGrants.id,
      sealContext: xeroGrants.sealContext,
      tokenVersion: xeroGrants.tokenVersion,
      accessTokenEnc: xeroGrants.accessTokenEnc,
    })
    .from(xeroGrants)
    .where(inArray(xeroGrants.id, missing));
  await Promise.all(
    rows.map(async (row) => {
      if (!row.accessTokenEnc) return;
      try {
        const token = await box.open(row.accessTokenEnc, tokenContext(row, 'access'));
        cache.set(row.id, row.tokenVersion, token);
        out.set(row.id, token);
      } catch (err) {
        out.set(row.id, err instanceof Error ? err : new Error(String(err)));
      }
    }),
  );
  return out;
}

export interface NewGrant {
  organizationId: string;
  /** The access token's `authentication_event_id`: Xero's id for this consent. */
  authEventId: string | null;
  scope: string | null;
  tokens: TokenSet;
  /** The tenants of this consent only (GET /connections?authEventId=...). */
  tenants: XeroTenant[];
}

export interface SavedGrant {
  grantId: string | null;
  connected: { id: string; tenantId: string; tenantName: string | null }[];
  /** Tenants of this consent that another organization already holds: not stored, not moved. */
  refused: { tenantId: string; tenantName: string | null; reason: 'held_by_another_organization' }[];
}

/**
 * Stores one consent: a grant with its token pair, and a connection per tenant of the consent.
 * A tenant the organization already had moves to the new grant (a reconnect); a tenant another
 * organization holds is refused, never re-assigned. Grants of the organization left without a tenant
 * are deleted (not revoked at Xero: the tenants they had now live on the new consent, and Xero's
 * documents do not say whether revoking the old one would drop them too). Then the organization's
 * invoices that waited for a connection are queued.
 */
export async function saveGrant(db: Database, box: SecretBox, input: NewGrant): Promise<SavedGrant> {
  const { organizationId, tokens } = input;
  const result: SavedGrant = { grantId: null, connected: [], refused: [] };
  if (input.tenants.length === 0) return result;

  const held = await db
    .select({ tenantId: xeroConnections.tenantId })
    .from(xeroConnections)
    .where(
      and(
        inArray(
          xeroConnections.tenantId,
          input.tenants.map((t) => t.tenantId),
        ),
        ne(xeroConnections.organizationId, organizationId),
      ),
    );
  const heldElsewhere = new Set(held.map((h) => h.tenantId));
  const mine = input.tenants.filter((t) => !heldElsewhere.has(t.tenantId));
  for (const t of input.tenants) {
    if (heldElsewhere.has(t.tenantId))
      result.refused.push({
        tenantId: t.tenantId,
        tenantName: t.tenantName,
        reason: 'held_by_another_organization',
      });
  }
  if (mine.length === 0) return result;

  const grant = { id: crypto.randomUUID(), sealContext: null };
  await db.insert(xeroGrants).values({
    id: grant.id,
    organizationId,
    authEventId: input.authEventId,
    scope: input.scope,
    accessTokenEnc: await box.seal(tokens.accessToken, tokenContext(grant, 'access')),
    refreshTokenEnc: await box.seal(tokens.refreshToken, tokenContext(grant, 'refresh')),
    accessExpiresAt: tokens.expiresAt,
  });
  result.grantId = grant.id;

  for (const tenant of mine) {
    // The NOT EXISTS keeps a tenant another organization took between the read above and here.
    const rows = await db.execute<{ id: string }>(sql`
      INSERT INTO xero_connections (organization_id, grant_id, tenant_id, tenant_name, xero_connection_id)
      SELECT ${organizationId}, ${grant.id}, ${tenant.tenantId}, ${tenant.tenantName}, ${tenant.connectionId}
      WHERE NOT EXISTS (SELECT 1 FROM xero_connections
                        WHERE tenant_id = ${tenant.tenantId} AND organization_id <> ${organizationId})
      ON CONFLICT (organization_id, tenant_id) DO UPDATE SET
        grant_id = excluded.grant_id, tenant_name = excluded.tenant_name,
        xero_connection_id = excluded.xero_connection_id, status = 'active', status_reason = NULL,
        parked_until = NULL, updated_at = now()
      RETURNING id`);
    const id = (rows as unknown as { rows: { id: string }[] }).rows[0]?.id;
    if (id) result.connected.push({ id, tenantId: tenant.tenantId, tenantName: tenant.tenantName });
    else
      result.refused.push({
        tenantId: tenant.tenantId,
        tenantName: tenant.tenantName,
        reason: 'held_by_another_organization',
      });
  }
  await db.execute(sql`
    DELETE FROM xero_grants g WHERE g.organization_id = ${organizationId}
      AND NOT EXISTS (SELECT 1 FROM xero_connections c WHERE c.grant_id = g.id)`);
  const first = result.connected[0];
  if (first) {
    // Waiting pushes of a tenant this consent brought back keep it; those that never had a connection
    // take the first tenant (as ingress does). Pushes of a tenant still not reconnected keep waiting.
    const ids = result.connected.map((c) => c.id);
    await db.execute(sql`
      UPDATE invoice_pushes SET status = 'queued', next_attempt_at = now(), updated_at = now(),
        connection_id = coalesce(connection_id, ${first.id}::uuid)
      WHERE organization_id = ${organizationId} AND status = 'awaiting_connection'
        AND (connection_id IS NULL OR connection_id = ANY(${sql.param(ids)}::uuid[]))`);
  }
  return result;
}
