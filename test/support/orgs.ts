import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { type CreatedOrganization, createOrganization } from '../../src/app/organizations.js';
import type { ServerProcess } from './server.js';

/** Creates an organization straight in the database, as `npm run org:create` does. */
export async function createOrg(url: string, name: string): Promise<CreatedOrganization> {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  try {
    return await createOrganization(drizzle({ client: pool }), name);
  } finally {
    await pool.end();
  }
}

/** Waits until the server's api-key registry refresh has picked the key up. */
export async function waitForKey(server: ServerProcess, apiKey: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await server.get('/api/invoices?limit=1', { headers: { authorization: `Bearer ${apiKey}` } });
    if (res.status === 200) return;
    if (Date.now() > deadline)
      throw new Error(`the server did not accept the key in time (last status ${res.status})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function invoiceBody(overrides: Record<string, unknown> = {}) {
  return {
    contact: { name: 'Acme Ltd' },
    lineItems: [{ description: 'Widget', quantity: '2', unitAmount: '10.50' }],
    date: '2026-11-29',
    currency: 'NZD',
    ...overrides,
  };
}
