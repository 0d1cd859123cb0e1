// API keys: 32 random bytes behind a recognisable prefix (so leaked keys are easy to grep for).
// Only the sha256 is stored; a key's hash is its lookup handle, so no stored value can be replayed.

import type { Database } from '@honest-health/platform';
import { encodeBase64Url, sha256Hex } from '@honest-health/platform/crypto';
import { sql } from 'drizzle-orm';
import { rowsOf } from './push/rows.js';

export const API_KEY_PREFIX = 'hh_live_';

export function generateApiKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return API_KEY_PREFIX + encodeBase64Url(bytes);
}

export function hashApiKey(key: string): string {
  return sha256Hex(key);
}

// An organization's keys as rows (schema.ts api_keys). Rotation is create, switch, revoke: no other
// row is touched. Each change is one statement, so it runs alike on pg, PGlite and Neon over HTTP.

export interface CreatedApiKey {
  id: string;
  organizationId: string;
  name: string;
  /** Shown once: only its hash is stored. */
  apiKey: string;
  createdAt: Date;
}

export interface ApiKeySummary {
  id: string;
  organizationId: string;
  name: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

const toDate = (v: Date | string) => new Date(v);
const toDateOrNull = (v: Date | string | null) => (v === null ? null : new Date(v));

/** A new active key for the organization; undefined when there is no such organization. */
export async function createApiKey(
  db: Database,
  organizationId: string,
  name: string,
): Promise<CreatedApiKey | undefined> {
  const apiKey = generateApiKey();
  const [row] = rowsOf<{ id: string; organization_id: string; name: string; created_at: Date | string }>(
    await db.execute(sql`
      INSERT INTO api_keys (organization_id, name, key_hash)
      SELECT id, ${name}, ${hashApiKey(apiKey)} FROM organizations WHERE id = ${organizationId}
      RETURNING id, organization_id, name, created_at`),
  );
  if (!row) return undefined;
  return {
    id: row.id,
    organizationId: row.organization_id,
    name: row.name,
    apiKey,
    createdAt: toDate(row.created_at),
  };
}

/** Every key (never the key or its hash), one organization's or all, oldest first. */
export async function listApiKeys(db: Database, organizationId?: string): Promise<ApiKeySummary[]> {
  const rows = rowsOf<{
    id: string;
    organization_id: string;
    name: string;
    created_at: Date | string;
    last_used_at: Date | string | null;
    revoked_at: Date | string | null;
  }>(
    await db.execute(sql`
      SELECT id, organization_id, name, created_at, last_used_at, revoked_at FROM api_keys
      ${organizationId === undefined ? sql`` : sql`WHERE organization_id = ${organizationId}`}
      ORDER BY created_at, id`),
  );
  return rows.map((r) => ({
    id: r.id,
    organizationId: r.organization_id,
    name: r.name,
    createdAt: toDate(r.created_at),
    lastUsedAt: toDateOrNull(r.last_used_at),
    revokedAt: toDateOrNull(r.revoked_at),
  }));
}

export type RevokeOutcome =
  | { kind: 'revoked'; organizationId: string; revokedAt: Date }
  | { kind: 'not_found' }
  | { kind: 'already_revoked'; revokedAt: Date }
  | { kind: 'last_key'; organizationId: string };

/**
 * Revokes one key. Refuses the organization's last active key unless `allowLast` (it would lock the
 * organization out; its data stays either way). The copy in organizations.api_key_hash, which the
 * previous release reads, is cleared in the same statement so neither release accepts the key.
 *
 * Atomic against a concurrent revocation: the organization's active keys are locked in id order, and
 * the count is of the rows locked. A row another revocation changed meanwhile is re-read once its lock
 * is free and drops out (READ COMMITTED re-checks a locked row), where a count in the statement's
 * snapshot would still see it active and let two revocations take the last two keys.
 */
export async function revokeApiKey(db: Database, id: string, allowLast: boolean): Promise<RevokeOutcome> {
  const [row] = rowsOf<{
    organization_id: string;
    revoked_at: Date | string | null;
    others: number | string;
    held: boolean;
    done: Date | string | null;
  }>(
    await db.execute(sql`
      WITH key AS (
        SELECT k.id, k.organization_id, k.key_hash, k.revoked_at FROM api_keys k WHERE k.id = ${id}
      ),
      active AS (
        SELECT a.id FROM api_keys a
        WHERE a.organization_id = (SELECT organization_id FROM key) AND a.revoked_at IS NULL
        ORDER BY a.id FOR UPDATE
      ),
      target AS (
        SELECT t.*, (SELECT count(*) FROM active a WHERE a.id <> t.id) AS others,
          EXISTS (SELECT 1 FROM active a WHERE a.id = t.id) AS held
        FROM key t
      ),
      revoked AS (
        UPDATE api_keys k SET revoked_at = now() FROM target t
        WHERE k.id = t.id AND t.held AND (t.others > 0 OR ${allowLast}::boolean)
        RETURNING k.revoked_at, t.key_hash, t.organization_id
      ),
      legacy AS (
        UPDATE organizations o SET api_key_hash = NULL FROM revoked r
        WHERE o.id = r.organization_id AND o.api_key_hash = r.key_hash
      )
      SELECT t.organization_id, t.revoked_at, t.others, t.held, (SELECT revoked_at FROM revoked) AS done
      FROM target t`),
  );
  if (!row) return { kind: 'not_found' };
  if (row.done !== null)
    return { kind: 'revoked', organizationId: row.organization_id, revokedAt: toDate(row.done) };
  if (row.revoked_at !== null) return { kind: 'already_revoked', revokedAt: toDate(row.revoked_at) };
  // Revoked by a concurrent call after this statement began: its time is that call's to report.
  if (!row.held) return { kind: 'already_revoked', revokedAt: new Date() };
  return { kind: 'last_key', organizationId: row.organization_id };
}
