import type { Database } from '@honest-health/platform';
import { asc, eq, sql } from 'drizzle-orm';
import { generateApiKey, hashApiKey } from './api-keys.js';
import { rowsOf } from './push/rows.js';
import { organizations } from './schema.js';

export interface CreatedOrganization {
  id: string;
  name: string;
  /** Shown once: only its hash is stored. */
  apiKey: string;
}

/**
 * The organization and its first key (api_keys, named "default"), in one statement. The key's hash is
 * also copied to organizations.api_key_hash, where the previous release looks keys up.
 */
export async function createOrganization(db: Database, name: string): Promise<CreatedOrganization> {
  const apiKey = generateApiKey();
  const keyHash = hashApiKey(apiKey);
  const [row] = rowsOf<{ id: string; name: string }>(
    await db.execute(sql`
      WITH org AS (
        INSERT INTO organizations (name, api_key_hash) VALUES (${name}, ${keyHash}) RETURNING id, name, created_at
      ), key AS (
        INSERT INTO api_keys (organization_id, key_hash, created_at)
        SELECT id, ${keyHash}, created_at FROM org
      )
      SELECT id, name FROM org`),
  );
  if (!row) throw new Error('insert returned no row');
  return { id: row.id, name: row.name, apiKey };
}

export async function removeOrganization(db: Database, id: string): Promise<boolean> {
  const rows = await db
    .delete(organizations)
    .where(eq(organizations.id, id))
    .returning({ id: organizations.id });
  return rows.length > 0;
}

export interface OrganizationSummary {
  id: string;
  name: string;
  createdAt: Date;
}

export async function listOrganizations(db: Database): Promise<OrganizationSummary[]> {
  return db
    .select({ id: organizations.id, name: organizations.name, createdAt: organizations.createdAt })
    .from(organizations)
    .orderBy(asc(organizations.createdAt), asc(organizations.id));
}

/** Organizations whose name equals `name` ignoring case and surrounding spaces. */
export async function organizationsNamed(db: Database, name: string): Promise<OrganizationSummary[]> {
  return db
    .select({ id: organizations.id, name: organizations.name, createdAt: organizations.createdAt })
    .from(organizations)
    .where(sql`lower(btrim(${organizations.name})) = lower(btrim(${name}))`)
    .orderBy(asc(organizations.createdAt));
}
