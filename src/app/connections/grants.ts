import type { Database } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import { inArray, sql } from 'drizzle-orm';
import { xeroGrants } from '../schema.js';
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
 * base64) costs more CPU than everything else a push does, so it happens once per version, not per push.
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
 * A tenant the organization already had keeps its connection row (its id, chosen and default) and
 * moves to the new grant (a reconnect); a tenant another organization holds is refused, never
 * re-assigned. The database decides who holds a tenant (unique tenant_id), so two organizations
 * connecting one tenant at the same instant get one holder and one `refused`. The grants this consent
 * left without a tenant (the ones its tenants moved from, and its own when every tenant was refused)
 * are deleted, and no other: a concurrent callback's grant, stored a moment before its connections,
 * is that callback's to keep. They are deleted (not revoked at Xero: revoking removes every
 * connection of the user to the app, docs/xero.md). A new connection receives nothing until the
 * organization chooses it; pushes that waited for one of these tenants are queued again.
 */
export async function saveGrant(db: Database, box: SecretBox, input: NewGrant): Promise<SavedGrant> {
  const { organizationId, tokens } = input;
  const result: SavedGrant = { grantId: null, connected: [], refused: [] };
  if (input.tenants.length === 0) return result;

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

  // The grants this consent's tenants were on before it: the only others it may leave without one.
  const replaced = new Set<string>([grant.id]);
  for (const tenant of input.tenants) {
    // ON CONFLICT on the tenant-wide key: a row of this organization is a reconnect (updated, id kept);
    // a row of another organization fails the WHERE, so nothing is returned and the tenant is refused.
    // A concurrent insert of the same tenant waits for the other transaction, then takes this path.
    const rows = await db.execute<{ id: string; previous_grant_id: string | null }>(sql`
      WITH previous AS (
        SELECT grant_id FROM xero_connections
        WHERE tenant_id = ${tenant.tenantId} AND organization_id = ${organizationId})
      INSERT INTO xero_connections (organization_id, grant_id, tenant_id, tenant_name, xero_connection_id)
      VALUES (${organizationId}, ${grant.id}, ${tenant.tenantId}, ${tenant.tenantName}, ${tenant.connectionId})
      ON CONFLICT (tenant_id) DO UPDATE SET
        grant_id = excluded.grant_id, tenant_name = excluded.tenant_name,
        xero_connection_id = excluded.xero_connection_id, status = 'active', status_reason = NULL,
        parked_until = NULL, updated_at = now()
      WHERE xero_connections.organization_id = excluded.organization_id
      RETURNING id, (SELECT grant_id FROM previous) AS previous_grant_id`);
    const [row] = (rows as unknown as { rows: { id: string; previous_grant_id: string | null }[] }).rows;
    const id = row?.id;
    if (row?.previous_grant_id) replaced.add(row.previous_grant_id);
    if (id) result.connected.push({ id, tenantId: tenant.tenantId, tenantName: tenant.tenantName });
    else
      result.refused.push({
        tenantId: tenant.tenantId,
        tenantName: tenant.tenantName,
        reason: 'held_by_another_organization',
      });
  }
  if (result.connected.length > 0) result.grantId = grant.id;
  // Includes this grant when every tenant was refused: its tokens are not kept.
  await db.execute(sql`
    DELETE FROM xero_grants g WHERE g.organization_id = ${organizationId}
      AND g.id = ANY(${sql.param([...replaced])}::uuid[])
      AND NOT EXISTS (SELECT 1 FROM xero_connections c WHERE c.grant_id = g.id)`);
  if (result.connected.length > 0) {
    // Waiting pushes of a tenant this consent brought back go to that tenant's connection, never to
    // another one: bound by connection (a reconnect kept the row) or by tenant (the row was deleted
    // and made again). They are queued when that connection is chosen; otherwise they wait for it.
    const ids = result.connected.map((c) => c.id);
    await db.execute(sql`
      UPDATE invoice_pushes p SET connection_id = c.id, updated_at = now(),
        status = CASE WHEN c.chosen THEN 'queued' ELSE 'awaiting_connection' END,
        next_attempt_at = CASE WHEN c.chosen THEN now() ELSE p.next_attempt_at END,
        last_error = CASE WHEN c.chosen THEN p.last_error
                          ELSE ${UNCHOSEN_PREFIX} || c.id || '/choose' END
      FROM xero_connections c
      WHERE c.id = ANY(${sql.param(ids)}::uuid[]) AND p.organization_id = ${organizationId}
        AND p.status = 'awaiting_connection'
        AND (p.connection_id = c.id OR (p.connection_id IS NULL AND p.tenant_id = c.tenant_id))`);
  }
  return result;
}

/** The reason a push waits for its tenant's connection to be chosen again (see saveGrant). */
const UNCHOSEN_PREFIX = 'its Xero tenant was connected again but not chosen: POST /api/connections/';
