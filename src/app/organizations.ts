import { asc, eq, sql } from 'drizzle-orm';
import type { Database } from '../platform/db/types.js';
import { generateApiKey, hashApiKey } from './api-keys.js';
import { organizations } from './schema.js';

export interface CreatedOrganization {
  id: string;
  name: string;
  /** Shown once: only its hash is stored. */
  apiKey: string;
}

export async function createOrganization(db: Database, name: string): Promise<CreatedOrganization> {
  const apiKey = generateApiKey();
  const [row] = await db
    .insert(organizations)
    .values({ name, apiKeyHash: hashApiKey(apiKey) })
    .returning({ id: organizations.id, name: organizations.name });
  if (!row) throw new Error('insert returned no row');
  return { ...row, apiKey };
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
