import type { Database } from '../platform/db/types.js';
import { organizations } from './schema.js';

export interface Organization {
  id: string;
  name: string;
}

/**
 * The organizations that ingress routes against, keyed by API key hash. Loaded at boot (a hard
 * step: a server that cannot authenticate anyone must not report ready).
 */
export class ApiKeyIndex {
  #byKeyHash = new Map<string, Organization>();

  byKeyHash(hash: string): Organization | undefined {
    return this.#byKeyHash.get(hash);
  }

  async load(db: Database): Promise<void> {
    const rows = await db
      .select({ id: organizations.id, name: organizations.name, keyHash: organizations.apiKeyHash })
      .from(organizations);
    this.#byKeyHash = new Map(rows.map((r) => [r.keyHash, { id: r.id, name: r.name }]));
  }
}
