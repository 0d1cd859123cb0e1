import { and, eq, inArray, isNull, lt, or, sql } from 'drizzle-orm';
import type { Database } from '../../platform/db/types.js';
import type { Logger } from '../../platform/log.js';
import type { SecretBox } from '../../platform/secret-box.js';
import { xeroConnections } from '../schema.js';
import type { XeroClient } from '../xero/client.js';
import { tokenContext } from '../xero/connections.js';

export interface RefreshTickDeps {
  xero: XeroClient;
  box: SecretBox;
  owner: string;
  /** Refresh access tokens that expire within this window (Xero's last 30 minutes). */
  refreshWithinMs: number;
  leaseMs: number;
  batchSize: number;
  log: Logger;
}

export interface RefreshTickResult {
  claimed: number;
  refreshed: number;
  /** Another replica saved a newer token first: nothing to do. */
  superseded: number;
  needsReauth: number;
  failed: number;
}

/**
 * Refreshes Xero tokens before they expire. The claim (one statement) takes a lease and records,
 * before Xero is called, which token version is being refreshed. The save is a compare-and-set on
 * token_version, so an older token never overwrites a newer one. If Xero's answer is lost or the
 * save fails (a failover between the two), the retry sends the same old refresh token, which Xero
 * still accepts for 30 minutes.
 */
export async function refreshExpiringTokens(db: Database, deps: RefreshTickDeps): Promise<RefreshTickResult> {
  const due = db
    .select({ id: xeroConnections.id })
    .from(xeroConnections)
    .where(
      and(
        eq(xeroConnections.status, 'active'),
        or(
          isNull(xeroConnections.accessExpiresAt),
          lt(
            xeroConnections.accessExpiresAt,
            sql`now() + ${`${deps.refreshWithinMs} milliseconds`}::interval`,
          ),
        ),
        or(
          isNull(xeroConnections.refreshLeaseExpiresAt),
          lt(xeroConnections.refreshLeaseExpiresAt, sql`now()`),
          eq(xeroConnections.refreshLeaseOwner, deps.owner),
        ),
      ),
    )
    .orderBy(xeroConnections.accessExpiresAt)
    .limit(deps.batchSize)
    .for('update', { skipLocked: true });
  const claimed = await db
    .update(xeroConnections)
    .set({
      refreshLeaseOwner: deps.owner,
      refreshLeaseExpiresAt: sql`now() + ${`${deps.leaseMs} milliseconds`}::interval`,
      refreshStartedAt: sql`now()`,
      refreshStartedVersion: sql`${xeroConnections.tokenVersion}`,
    })
    .where(inArray(xeroConnections.id, due))
    .returning({
      id: xeroConnections.id,
      organizationId: xeroConnections.organizationId,
      tenantId: xeroConnections.tenantId,
      refreshTokenEnc: xeroConnections.refreshTokenEnc,
      tokenVersion: xeroConnections.tokenVersion,
    });

  const result: RefreshTickResult = {
    claimed: claimed.length,
    refreshed: 0,
    superseded: 0,
    needsReauth: 0,
    failed: 0,
  };
  // Sequential: a handful of connections per minute, and each save must see the previous one.
  for (const c of claimed) {
    const refreshToken = await deps.box.open(
      c.refreshTokenEnc,
      tokenContext(c.organizationId, c.tenantId, 'refresh'),
    );
    const outcome = await deps.xero.refresh(refreshToken);
    const mine = and(eq(xeroConnections.id, c.id), eq(xeroConnections.tokenVersion, c.tokenVersion));
    const releaseLease = { refreshLeaseOwner: null, refreshLeaseExpiresAt: null };

    if (outcome.kind === 'ok') {
      const { tokens } = outcome;
      const saved = await db
        .update(xeroConnections)
        .set({
          accessTokenEnc: await deps.box.seal(
            tokens.accessToken,
            tokenContext(c.organizationId, c.tenantId, 'access'),
          ),
          refreshTokenEnc: await deps.box.seal(
            tokens.refreshToken,
            tokenContext(c.organizationId, c.tenantId, 'refresh'),
          ),
          accessExpiresAt: tokens.expiresAt,
          tokenVersion: sql`${xeroConnections.tokenVersion} + 1`,
          refreshStartedAt: null,
          refreshStartedVersion: null,
          updatedAt: sql`now()`,
          ...releaseLease,
        })
        .where(mine)
        .returning({ id: xeroConnections.id });
      if (saved.length > 0) result.refreshed += 1;
      else result.superseded += 1;
      continue;
    }

    if (outcome.kind === 'invalid_grant') {
      // Rejected: either another replica already rotated it (we hold an old version), or the
      // grant is really gone. Only the latter needs a human.
      const marked = await db
        .update(xeroConnections)
        .set({ status: 'needs_reauth', updatedAt: sql`now()`, ...releaseLease })
        .where(mine)
        .returning({ id: xeroConnections.id });
      if (marked.length > 0) {
        result.needsReauth += 1;
        deps.log.warn('xero connection needs re-authorisation', { connection: c.id });
      } else {
        result.superseded += 1;
      }
      continue;
    }

    // Transient: give the lease back so the next tick retries with the same (still valid) token.
    await db.update(xeroConnections).set(releaseLease).where(eq(xeroConnections.id, c.id));
    deps.log.warn('xero token refresh failed; will retry', { connection: c.id, reason: outcome.reason });
    result.failed += 1;
  }
  return result;
}
