import type { Database, Logger } from '@honest-health/platform';
import { interval, poisonReason } from '@honest-health/platform';
import { type SecretBox, SecretBoxOpenError } from '@honest-health/platform/crypto';
import { and, eq, inArray, isNull, lt, or, sql } from 'drizzle-orm';
import { ofConnection } from '../push/connection-range.js';
import { xeroGrants } from '../schema.js';
import { connectionEventData, outbox } from '../webhooks/outbox.js';
import type { XeroClient } from '../xero/client.js';
import { tokenContext } from './grants.js';

export interface RefreshTickDeps {
  xero: XeroClient;
  box: SecretBox;
  /** This run's lease owner (TickRun.owner): no other run shares it. */
  owner: string;
  /** Refresh access tokens that expire within this window (Xero's last 30 minutes)... */
  refreshWithinMs: number;
  /** ...and only for grants with a push due within this horizon (default: refreshWithinMs). */
  aheadMs?: number;
  /** An idle grant's refresh token is used once it is this old (default KEEP_ALIVE_MS). */
  keepAliveMs?: number;
  /** Taken anew right before each grant's call: it must outlast one Xero call (its timeout) and the save. */
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
  /** Xero could not be reached or answered an error; retried after a back-off. */
  failed: number;
  /** The stored refresh token did not open (a key not configured, a corrupt row); backed off. */
  undecryptable: number;
  /** Claimed, but another replica held the grant's lease by the time its turn came: skipped. */
  leaseLost: number;
  /** Xero refused the client credentials: nothing more is tried until the back-off ends. */
  invalidClient: number;
}

/**
 * How long a grant waits after its `failures`-th failure in a row. A row that stays broken (its token
 * does not open, the refresh throws) waits 1 min, doubling to 1 h, so it takes few batch places. A
 * failure at Xero (unreachable, 5xx, an answer lost) is retried on the next tick, then after 1 min
 * doubling to 5 min: if Xero did rotate the token, the old one is honoured for 30 minutes only.
 */
export function refreshBackoffMs(failures: number, kind: 'broken' | 'xero'): number {
  if (kind === 'broken') return Math.min(3_600_000, 60_000 * 2 ** Math.max(0, failures - 1));
  return failures <= 1 ? 0 : Math.min(300_000, 60_000 * 2 ** (failures - 2));
}

/**
 * Xero: "Unused refresh tokens expire after 60 days" (developer.xero.com/faq/oauth2). An idle grant's
 * refresh token is used every 7 days: one call a week instead of ~70 a day, with 53 days left to
 * notice and fix a refresh that keeps failing (a lost key, Xero unreachable) before the consent is lost.
 */
export const KEEP_ALIVE_MS = 7 * 86_400_000;

/**
 * The grants this run refreshes, pushes first. A grant needs its access token renewed when a push on
 * one of its active connections is due within the horizon: an EXISTS that probes
 * invoice_pushes_connection_due_idx (partial: queued and failed only), so pushed and dead history is
 * never read. Its cost is one probe per connection of each active grant whose token is about to expire
 * (every idle grant), stopping at the first due push. Otherwise an idle grant is refreshed only to keep
 * its refresh token alive.
 */
function dueGrants(deps: RefreshTickDeps) {
  // A connection's due pushes as the claim reads them (ofConnection, in index order): joined on
  // equality, the planner may scan every pending push for a connection that has none due.
  const pushDue = sql`EXISTS (
    SELECT 1 FROM xero_connections c CROSS JOIN LATERAL (
      SELECT 1 FROM invoice_pushes p
      WHERE p.status IN ('queued', 'failed') AND ${ofConnection(sql`c.id`)}
        AND p.next_attempt_at < now() + ${interval(deps.aheadMs ?? deps.refreshWithinMs)}
      ORDER BY p.connection_id, p.next_attempt_at LIMIT 1) due
    WHERE c.grant_id = ${xeroGrants.id} AND c.status = 'active')`;
  const expiring = or(
    isNull(xeroGrants.accessExpiresAt),
    lt(xeroGrants.accessExpiresAt, sql`now() + ${interval(deps.refreshWithinMs)}`),
  );
  const forPush = and(expiring, pushDue);
  const keepAlive = lt(
    xeroGrants.refreshTokenIssuedAt,
    sql`now() - ${interval(deps.keepAliveMs ?? KEEP_ALIVE_MS)}`,
  );
  return { forPush, keepAlive };
}

/** The batch this run claims (its ids), locked: exported so that a benchmark can EXPLAIN it. */
export function dueGrantsQuery(db: Database, deps: RefreshTickDeps) {
  const { forPush, keepAlive } = dueGrants(deps);
  return (
    db
      .select({ id: xeroGrants.id })
      .from(xeroGrants)
      .where(
        and(
          eq(xeroGrants.status, 'active'),
          or(forPush, keepAlive),
          or(isNull(xeroGrants.refreshRetryAt), lt(xeroGrants.refreshRetryAt, sql`now()`)),
          // No live lease, this run's owner's included: an owner is one run, so a lease it holds is
          // one it is still using, and a crashed run's lease comes back by expiry only.
          or(isNull(xeroGrants.refreshLeaseExpiresAt), lt(xeroGrants.refreshLeaseExpiresAt, sql`now()`)),
        ),
      )
      // Pushes first: a backlog of keep-alives (every grant the migration stamped at once) never delays one.
      .orderBy(sql`(${forPush}) DESC`, xeroGrants.accessExpiresAt)
      .limit(deps.batchSize)
      .for('update', { skipLocked: true })
  );
}

/** At most this much of an unexpected error's message is kept on the row. */
const MAX_REASON = 200;

/**
 * Refreshes what is needed: a grant's access token (Xero's: "30 minutes") ahead of a push due on it,
 * and an idle grant's refresh token once per keep-alive cadence (KEEP_ALIVE_MS); an idle grant's
 * access token is left to expire. Once per grant, whatever number of tenants it serves (one consent,
 * one token pair). A push the claim found with a stale token is deferred and, being due, makes its
 * grant one of the next run's, ahead of every keep-alive. The claim (one statement) reserves a batch.
 * Then, one grant after another, the lease is taken anew right before Xero is called (a
 * compare-and-set on this owner and the token version, recording which version is being refreshed), so
 * the lease covers the whole call however long the batch has run; a grant whose lease another run took meanwhile is
 * skipped. No two runs redeem one refresh token. The save is a compare-and-set on token_version,
 * so an older token never overwrites a newer one. If Xero's answer is lost or the save fails (a
 * failover between the two), the retry sends the same old refresh token, which Xero still accepts for
 * 30 minutes (docs/xero.md#tokens).
 *
 * One grant fails alone: a refresh token that does not open, or a refresh that fails or throws, is
 * recorded on its row (refresh_error, no secrets) and backed off, and the batch goes on. Only a
 * poisoned database connection ends the run (the tick runner retries it on a fresh pool).
 */
export async function refreshExpiringTokens(db: Database, deps: RefreshTickDeps): Promise<RefreshTickResult> {
  const result: RefreshTickResult = {
    claimed: 0,
    refreshed: 0,
    superseded: 0,
    needsReauth: 0,
    failed: 0,
    undecryptable: 0,
    leaseLost: 0,
    invalidClient: 0,
  };
  if (deps.credentials?.blocked()) return result;
  const due = dueGrantsQuery(db, deps);
  const claimed = await db
    .update(xeroGrants)
    .set({
      refreshLeaseOwner: deps.owner,
      refreshLeaseExpiresAt: sql`now() + ${interval(deps.leaseMs)}`,
    })
    .where(inArray(xeroGrants.id, due))
    .returning({
      id: xeroGrants.id,
      sealContext: xeroGrants.sealContext,
      refreshTokenEnc: xeroGrants.refreshTokenEnc,
      tokenVersion: xeroGrants.tokenVersion,
      refreshFailures: xeroGrants.refreshFailures,
    });
  result.claimed = claimed.length;

  const releaseLease = { refreshLeaseOwner: null, refreshLeaseExpiresAt: null };
  const recovered = { refreshError: null, refreshFailures: 0, refreshRetryAt: null };
  /** Records why the grant failed and backs it off; the lease goes back at once. */
  const failed = (g: (typeof claimed)[number], reason: string, kind: 'broken' | 'xero') =>
    db
      .update(xeroGrants)
      .set({
        refreshError: reason,
        refreshFailures: sql`${xeroGrants.refreshFailures} + 1`,
        refreshRetryAt: sql`now() + ${interval(refreshBackoffMs(g.refreshFailures + 1, kind))}`,
        refreshStartedAt: null,
        refreshStartedVersion: null,
        updatedAt: sql`now()`,
        ...releaseLease,
      })
      .where(and(eq(xeroGrants.id, g.id), eq(xeroGrants.refreshLeaseOwner, deps.owner)));

  // Sequential: a handful of grants per minute, and each save must see the previous one.
  for (const [i, g] of claimed.entries()) {
    const mine = and(eq(xeroGrants.id, g.id), eq(xeroGrants.tokenVersion, g.tokenVersion));
    // The batch's lease may have run out while earlier grants were refreshed: take it again for this
    // call only if it is still ours (or expired unclaimed) and the token is the one we read.
    const taken = await db
      .update(xeroGrants)
      .set({
        refreshLeaseExpiresAt: sql`now() + ${interval(deps.leaseMs)}`,
        refreshStartedAt: sql`now()`,
        refreshStartedVersion: g.tokenVersion,
      })
      .where(and(mine, eq(xeroGrants.status, 'active'), eq(xeroGrants.refreshLeaseOwner, deps.owner)))
      .returning({ id: xeroGrants.id });
    if (taken.length === 0) {
      result.leaseLost += 1;
      continue;
    }

    let refreshToken: string;
    try {
      refreshToken = await deps.box.open(g.refreshTokenEnc, tokenContext(g, 'refresh'));
    } catch (err) {
      // Active-but-failing, not needs_reauth: the grant is fine at Xero (an unused refresh token lasts
      // 60 days), and a key put back in TOKEN_ENCRYPTION_KEYS_PREVIOUS heals it on the next try.
      const why = err instanceof SecretBoxOpenError ? err.message : 'does not open';
      await failed(g, `the stored refresh token ${why}`, 'broken');
      result.undecryptable += 1;
      deps.log.error('xero token refresh skipped: the stored refresh token does not open', {
        grant: g.id,
        reason: why,
      });
      continue;
    }

    let outcome: Awaited<ReturnType<XeroClient['refresh']>>;
    try {
      outcome = await deps.xero.refresh(refreshToken);
    } catch (err) {
      // The client classifies every answer, so this is a bug; it costs this grant, not the batch.
      const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      await failed(g, `token refresh failed unexpectedly (${message.slice(0, MAX_REASON)})`, 'broken');
      result.failed += 1;
      deps.log.error('xero token refresh failed unexpectedly', { grant: g.id, err });
      continue;
    }

    try {
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
            refreshTokenIssuedAt: sql`now()`,
            refreshStartedAt: null,
            refreshStartedVersion: null,
            updatedAt: sql`now()`,
            ...recovered,
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
          .set({
            status: 'needs_reauth',
            refreshError: 'Xero refused the refresh token',
            updatedAt: sql`now()`,
            ...releaseLease,
          })
          .where(mine)
          .returning({ id: xeroGrants.id });
        if (marked.length > 0) {
          // With a connection.needs_reauth event for each connection this makes so, in the same statement.
          await db.execute(sql`
            WITH marked AS (
              UPDATE xero_connections c SET status = 'needs_reauth',
                status_reason = 'Xero refused the refresh token', updated_at = now()
              FROM xero_connections o WHERE o.id = c.id AND c.grant_id = ${g.id}
              RETURNING c.id, c.organization_id, c.tenant_id, c.tenant_name, c.status_reason AS reason, o.status AS was),
            newly AS (SELECT * FROM marked WHERE was = 'active'),
            ${outbox('reauth', 'newly', 'connection.needs_reauth', connectionEventData)}
            SELECT count(*) FROM marked`);
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
        await db
          .update(xeroGrants)
          .set(releaseLease)
          .where(and(inArray(xeroGrants.id, rest), eq(xeroGrants.refreshLeaseOwner, deps.owner)));
        result.invalidClient += 1;
        const first = deps.credentials?.rejected() ?? true;
        if (first) {
          deps.log.error(
            'xero refused the client credentials (invalid_client): check XERO_CLIENT_ID and XERO_CLIENT_SECRET; token refresh backs off',
          );
        }
        break;
      }

      // Transient: the token is still valid (or, if Xero rotated it and the answer was lost, the old
      // one is for 30 minutes): retried on the next tick, then backed off.
      await failed(g, `Xero token refresh failed: ${outcome.reason}`, 'xero');
      deps.log.warn('xero token refresh failed; will retry', { grant: g.id, reason: outcome.reason });
      result.failed += 1;
    } catch (err) {
      // A poisoned connection ends the run (the runner retries it on a fresh pool, and the lease or
      // the write-ahead version keeps the retry safe); anything else is this grant's alone.
      if (poisonReason(err) !== undefined) throw err;
      // Xero rotated the token: the old one is honoured for 30 minutes, so retry well inside them.
      await failed(g, 'saving the refreshed token failed', 'xero');
      result.failed += 1;
      deps.log.error('xero token refresh could not be saved', { grant: g.id, err });
    }
  }
  return result;
}
