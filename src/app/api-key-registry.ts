import type { Database } from '@honest-health/platform';
import { sql } from 'drizzle-orm';
import { rowsOf } from './push/rows.js';

export interface Organization {
  id: string;
  name: string;
}

export interface KeyHolder {
  organization: Organization;
  /** The api_keys row: what the rate limit counts against and last_used_at records. */
  keyId: string;
}

/** last_used_at is a coarse signal: written at most this often per key, never per request. */
export const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * The active API keys that ingress authenticates against, keyed by hash. Loaded at boot (a hard step:
 * a server that cannot authenticate anyone must not report ready) and reloaded every
 * API_KEY_REFRESH_MS, which bounds how long a revoked key keeps working on any replica or isolate.
 * Each reload first writes last_used_at for the keys used since the one before.
 */
export class ApiKeyRegistry {
  #byKeyHash = new Map<string, KeyHolder>();
  #used = new Set<string>();

  byKeyHash(hash: string): KeyHolder | undefined {
    const holder = this.#byKeyHash.get(hash);
    if (holder) this.#used.add(holder.keyId);
    return holder;
  }

  async load(db: Database): Promise<void> {
    await this.#recordUse(db);
    const rows = rowsOf<{ key_id: string; key_hash: string; id: string; name: string }>(
      await db.execute(sql`
        SELECT k.id AS key_id, k.key_hash, o.id, o.name
        FROM api_keys k JOIN organizations o ON o.id = k.organization_id
        WHERE k.revoked_at IS NULL`),
    );
    this.#byKeyHash = new Map(
      rows.map((r) => [r.key_hash, { organization: { id: r.id, name: r.name }, keyId: r.key_id }]),
    );
  }

  // One statement per reload for every key used since, and a key already marked within the minute is
  // left alone: the write costs nothing per request. Failing (a read-only database in a failover)
  // keeps the keys for the next reload and never fails the reload itself.
  async #recordUse(db: Database): Promise<void> {
    if (this.#used.size === 0) return;
    const ids = [...this.#used];
    this.#used = new Set();
    try {
      await db.execute(sql`
        UPDATE api_keys SET last_used_at = now()
        WHERE id = ANY(${`{${ids.join(',')}}`}::uuid[])
          AND (last_used_at IS NULL OR last_used_at < now() - ${`${LAST_USED_RESOLUTION_MS} milliseconds`}::interval)`);
    } catch {
      for (const id of ids) this.#used.add(id);
    }
  }
}
