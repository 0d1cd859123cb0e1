import type { Database } from '@honest-health/platform';
import { interval } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import { encodeBase64Url, sha256Hex } from '@honest-health/platform/crypto';
import { sql } from 'drizzle-orm';
import { rowsOf } from '../push/rows.js';

/** How long a flow may take from opening the link to the callback. */
export const STATE_TTL_MS = 10 * 60_000;

/** 32 random bytes, base64url: 43 characters, the shortest verifier RFC 7636 §4.1 allows. */
export const randomToken = (): string => encodeBase64Url(crypto.getRandomValues(new Uint8Array(32)));

/** What randomToken makes; anything else is refused before the database is asked. */
export const isWellFormedToken = (token: string | undefined): token is string =>
  token !== undefined && /^[A-Za-z0-9_-]{43}$/.test(token);

/** Sealed to its row: a verifier copied into another state's row does not open. */
const verifierContext = (stateHash: string) => `oauth_states.code_verifier:${stateHash}`;

/** RFC 7636 §4.2: code_challenge = BASE64URL(SHA256(ASCII(code_verifier))). */
export async function s256Challenge(verifier: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  return encodeBase64Url(new Uint8Array(digest));
}

export interface StartedFlow {
  organizationId: string;
  state: string;
  codeChallenge: string;
}

/**
 * Opens a connect link: consumes it and creates the flow's state, bound to the browser (the hash of
 * its cookie) and carrying a fresh PKCE verifier, sealed. One statement, so a link is never spent
 * without its state being written, on every driver. Undefined: the link is unknown, used or expired.
 */
export async function startFlow(
  db: Database,
  box: SecretBox,
  input: { link: string; browser: string },
): Promise<StartedFlow | undefined> {
  const state = randomToken();
  const stateHash = sha256Hex(state);
  const verifier = randomToken();
  const verifierEnc = await box.seal(verifier, verifierContext(stateHash));
  const result = await db.execute(sql`
    WITH link AS (
      DELETE FROM connect_links
      WHERE link_hash = ${sha256Hex(input.link)} AND expires_at > now()
      RETURNING organization_id)
    INSERT INTO oauth_states (state_hash, organization_id, expires_at, browser_hash, code_verifier_enc)
    SELECT ${stateHash}, organization_id, now() + ${interval(STATE_TTL_MS)}, ${sha256Hex(input.browser)},
           ${verifierEnc}
    FROM link
    RETURNING organization_id`);
  const [row] = rowsOf<{ organization_id: string }>(result);
  if (!row) return undefined;
  return { organizationId: row.organization_id, state, codeChallenge: await s256Challenge(verifier) };
}

export type ConsumedState =
  | { kind: 'ok'; organizationId: string; organizationName: string; codeVerifier: string }
  /** Unknown, used, expired, or written by a release before browser binding. */
  | { kind: 'unknown' }
  /** A live state, but this browser is not the one that opened the link: left for that browser. */
  | { kind: 'other_browser' };

/**
 * Single use: the DELETE consumes the state only together with the browser that started it, so a
 * replayed or expired state finds nothing, and a state carried to another browser is refused without
 * spending the owner's flow.
 */
export async function consumeState(
  db: Database,
  box: SecretBox,
  input: { state: string; browser: string | undefined },
): Promise<ConsumedState> {
  const stateHash = sha256Hex(input.state);
  if (input.browser) {
    const result = await db.execute(sql`
      WITH consumed AS (
        DELETE FROM oauth_states
        WHERE state_hash = ${stateHash} AND browser_hash = ${sha256Hex(input.browser)}
          AND code_verifier_enc IS NOT NULL AND expires_at > now()
        RETURNING organization_id, code_verifier_enc)
      SELECT c.organization_id, c.code_verifier_enc, o.name
      FROM consumed c JOIN organizations o ON o.id = c.organization_id`);
    const [row] = rowsOf<{ organization_id: string; code_verifier_enc: string; name: string }>(result);
    if (row) {
      return {
        kind: 'ok',
        organizationId: row.organization_id,
        organizationName: row.name,
        codeVerifier: await box.open(row.code_verifier_enc, verifierContext(stateHash)),
      };
    }
  }
  const live = await db.execute(sql`
    SELECT 1 FROM oauth_states
    WHERE state_hash = ${stateHash} AND browser_hash IS NOT NULL AND expires_at > now()`);
  return rowsOf(live).length > 0 ? { kind: 'other_browser' } : { kind: 'unknown' };
}
