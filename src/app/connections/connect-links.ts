import type { Database } from '@honest-health/platform';
import { interval } from '@honest-health/platform';
import { sha256Hex } from '@honest-health/platform/crypto';
import { sql } from 'drizzle-orm';
import { rowsOf } from '../push/rows.js';
import { randomToken } from './oauth-state.js';

/** How long a minted link may wait before a browser opens it. */
export const LINK_TTL_MS = 10 * 60_000;
/**
 * Pending connect flows one organization may hold at once (ORG_MAX_PENDING_CONNECT_FLOWS): unopened
 * links plus opened flows whose OAuth state waits for Xero's callback, so a leaked API key can fill
 * neither connect_links nor oauth_states.
 */
export const DEFAULT_MAX_PENDING_FLOWS = 20;

export type MintedLink = { kind: 'ok'; token: string; expiresAt: Date } | { kind: 'too_many' };

/**
 * Expired links and flows, swept by a tick (never on a request, where a stranger's requests would
 * pay for it): one statement, so it runs on every driver.
 */
export async function sweepExpiredFlows(db: Database): Promise<{ links: number; states: number }> {
  const [row] = rowsOf<{ links: number | string; states: number | string }>(
    await db.execute(sql`
      WITH links AS (DELETE FROM connect_links WHERE expires_at < now() RETURNING 1),
           states AS (DELETE FROM oauth_states WHERE expires_at < now() RETURNING 1)
      SELECT (SELECT count(*) FROM links)::int AS links, (SELECT count(*) FROM states)::int AS states`),
  );
  return { links: Number(row?.links ?? 0), states: Number(row?.states ?? 0) };
}

/** A one-time link token for the organization; only its hash is stored. */
export async function mintLink(
  db: Database,
  organizationId: string,
  maxPending = DEFAULT_MAX_PENDING_FLOWS,
): Promise<MintedLink> {
  const token = randomToken();
  // One statement: the bound holds for concurrent mints too, up to a race of a few rows.
  const result = await db.execute(sql`
    INSERT INTO connect_links (link_hash, organization_id, expires_at)
    SELECT ${sha256Hex(token)}, ${organizationId}, now() + ${interval(LINK_TTL_MS)}
    WHERE (SELECT count(*) FROM connect_links
           WHERE organization_id = ${organizationId} AND expires_at > now())
        + (SELECT count(*) FROM oauth_states
           WHERE organization_id = ${organizationId} AND expires_at > now()) < ${maxPending}
    RETURNING expires_at`);
  const [row] = rowsOf<{ expires_at: Date | string }>(result);
  if (!row) return { kind: 'too_many' };
  return { kind: 'ok', token, expiresAt: new Date(row.expires_at) };
}
