import { eq } from 'drizzle-orm';
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
