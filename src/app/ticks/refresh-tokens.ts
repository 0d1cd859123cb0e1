import { and, eq, inArray, isNull, lt, or, sql } from 'drizzle-orm';
import { interval } from '../../platform/db/interval.js';
import type { Database } from '../../platform/db/types.js';
import type { Logger } from '../../platform/log.js';
import type { SecretBox } from '../../platform/secret-box.js';
import { tokenContext } from '../connections/grants.js';
import { xeroConnections, xeroGrants } from '../schema.js';
import type { XeroClient } from '../xero/client.js';

export interface RefreshTickDeps {
  xero: XeroClient;
  box: SecretBox;
  owner: string;
  /** Refresh access tokens that expire within this window (Xero's last 30 minutes). */
  refreshWithinMs: number;
  leaseMs: number;
  batchSize: number;
  log: Logger;
  /** Kept from tick to tick: an `invalid_client` backs every refresh off (one per process). */
  credentials?: CredentialsState;
}

/**
 * `invalid_client` (a rotated or wrong client secret) is configuration, not a grant's fault: it is
 * reported once, and refreshing backs off (1 min, doubling to 1 h) until Xero accepts the client again.
 */
export class CredentialsState {
  failures = 0;
  blockedUntil = 0;

  constructor(private readonly now: () => number = Date.now) {}

  blocked(): boolean {
    return this.now() < this.blockedUntil;
  }

  /** Returns true the first time, when the failure should be reported. */
  rejected(): boolean {
    this.failures += 1;
    this.blockedUntil = this.now() + Math.min(3_600_000, 60_000 * 2 ** (this.failures - 1));
    return this.failures === 1;
  }

  /** Returns true when credentials had been rejected before. */
  accepted(): boolean {
    const was = this.failures > 0;
    this.failures = 0;
    this.blockedUntil = 0;
    return was;
  }
}

export interface RefreshTickResult {
  claimed: number;
  refreshed: number;
  /** Another replica saved a newer token first: nothing to do. */
  superseded: number;
  needsReauth: number;
  failed: number;
  /** Xero refused the client credentials: nothing more is tried until the back-off ends. */
  invalidClient: number;
}

/**
 * Refreshes Xero grants before their access token expires: once per grant, whatever number of tenants
 * it serves (one consent, one token pair). The claim (one statement) takes a lease and records,
 * before Xero is called, which token version is being refreshed. The save is a compare-and-set on
 * token_version, so an older token never overwrites a newer one. If Xero's answer is lost or the save
 * fails (a failover between the two), the retry sends the same old refresh token, which Xero still
 * accepts for 30 minutes.
 */
export async function refreshExpiringTokens(db: Database, deps: RefreshTickDeps): Promise<RefreshTickResult> {
  const result: RefreshTickResult = {
    claimed: 0,
    refreshed: 0,
    superseded: 0,
    needsReauth: 0,
    failed: 0,
    invalidClient: 0,
  };
  if (deps.credentials?.blocked()) return result;
  const due = db
    .select({ id: xeroGrants.id })
    .from(xeroGrants)
    .where(
      and(
        eq(xeroGrants.status, 'active'),
        or(
          isNull(xeroGrants.accessExpiresAt),
          lt(xeroGrants.accessExpiresAt, sql`now() + ${interval(deps.refreshWithinMs)}`),
        ),
        or(
          isNull(xeroGrants.refreshLeaseExpiresAt),
          lt(xeroGrants.refreshLeaseExpiresAt, sql`now()`),
          eq(xeroGrants.refreshLeaseOwner, deps.owner),
        ),
      ),
    )
    .orderBy(xeroGrants.accessExpiresAt)
    .limit(deps.batchSize)
    .for('update', { skipLocked: true });
  const claimed = await db
    .update(xeroGrants)
    .set({
      refreshLeaseOwner: deps.owner,
      refreshLeaseExpiresAt: sql`now() + ${interval(deps.leaseMs)}`,
      refreshStartedAt: sql`now()`,
      refreshStartedVersion: sql`${xeroGrants.tokenVersion}`,
    })
    .where(inArray(xeroGrants.id, due))
    .returning({
      id: xeroGrants.id,
      sealContext: xeroGrants.sealContext,
      refreshTokenEnc: xeroGrants.refreshTokenEnc,
      tokenVersion: xeroGrants.tokenVersion,
    });
  result.claimed = claimed.length;

  const releaseLease = { refreshLeaseOwner: null, refreshLeaseExpiresAt: null };
  // Sequential: a handful of grants per minute, and each save must see the previous one.
  for (const [i, g] of claimed.entries()) {
    const refreshToken = await deps.box.open(g.refreshTokenEnc, tokenContext(g, 'refresh'));
    const outcome = await deps.xero.refresh(refreshToken);
    const mine = and(eq(xeroGrants.id, g.id), eq(xeroGrants.tokenVersion, g.tokenVersion));

    if (outcome.kind === 'ok') {
      if (deps.credentials?.accepted()) deps.log.info('xero accepts the client credentials again');
      const { tokens } = outcome;
      // Re-sealed under the grant's own context (a migrated grant leaves its per-tenant one here).
      const own = { id: g.id, sealContext: null };
      const saved = await db
        .update(xeroGrants)
        .set({
          accessTokenEnc: await deps.box.seal(tokens.accessToken, tokenContext(own, 'access')),
          refreshTokenEnc: await deps.box.seal(tokens.refreshToken, tokenContext(own, 'refresh')),
          sealContext: null,
          accessExpiresAt: tokens.expiresAt,
          tokenVersion: sql`${xeroGrants.tokenVersion} + 1`,
          refreshStartedAt: null,
          refreshStartedVersion: null,
          updatedAt: sql`now()`,
          ...releaseLease,
        })
        .where(mine)
        .returning({ id: xeroGrants.id });
      if (saved.length > 0) result.refreshed += 1;
      else result.superseded += 1;
      continue;
    }

    if (outcome.kind === 'invalid_grant' || outcome.kind === 'no_refresh_token') {
      // Rejected: either another replica already rotated it (we hold an old version), or the grant is
      // really gone. Only the latter needs a human; every tenant of the grant waits for a reconnect.
      const marked = await db
        .update(xeroGrants)
        .set({ status: 'needs_reauth', updatedAt: sql`now()`, ...releaseLease })
        .where(mine)
        .returning({ id: xeroGrants.id });
      if (marked.length > 0) {
        await db
          .update(xeroConnections)
          .set({
            status: 'needs_reauth',
            statusReason: 'Xero refused the refresh token',
            updatedAt: sql`now()`,
          })
          .where(eq(xeroConnections.grantId, g.id));
        result.needsReauth += 1;
        deps.log.warn('xero grant needs re-authorisation', { grant: g.id });
      } else {
        result.superseded += 1;
      }
      continue;
    }

    if (outcome.kind === 'invalid_client') {
      // Every grant would get the same answer: give this and the rest of the batch back and back off.
      const rest = claimed.slice(i).map((r) => r.id);
      await db.update(xeroGrants).set(releaseLease).where(inArray(xeroGrants.id, rest));
      result.invalidClient += 1;
      const first = deps.credentials?.rejected() ?? true;
      if (first) {
        deps.log.error(
          'xero refused the client credentials (invalid_client): check XERO_CLIENT_ID and XERO_CLIENT_SECRET; token refresh backs off',
        );
      }
      break;
    }

    // Transient: give the lease back so the next tick retries with the same (still valid) token.
    await db.update(xeroGrants).set(releaseLease).where(eq(xeroGrants.id, g.id));
    deps.log.warn('xero token refresh failed; will retry', { grant: g.id, reason: outcome.reason });
    result.failed += 1;
  }
  return result;
}
