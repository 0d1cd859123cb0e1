// What bench/ingress.ts needs around the load runs: the invoice it submits, the baseline process, a
// migrated database for it and row counts.

import { createLogger } from '@honest-health/platform';
import { migrate } from '@honest-health/platform/db';
import { type PgCompatiblePool, wrapPgCompatiblePool } from '@honest-health/platform/drivers/pg';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { migrations } from '../../src/app/migrations.gen.js';
import { type ScriptServer, spawnScriptServer } from './script-server.js';

/** A realistic invoice with three line items; it passes our validation as it stands. */
export const INVOICE = {
  contact: { name: 'Harbourside Joinery Ltd' },
  date: '2026-11-29',
  dueDate: '2026-12-20',
  currency: 'NZD',
  reference: 'PO-88412 / site 3',
  lineItems: [
    {
      description: 'Oak veneer panels, 2400 x 1200 x 18 mm',
      quantity: '12',
      unitAmount: '184.50',
      accountCode: '200',
    },
    { description: 'Installation labour (hours)', quantity: '7.5', unitAmount: '95.00', accountCode: '210' },
    { description: 'Delivery, Auckland metro', quantity: '1', unitAmount: '65.00', accountCode: '220' },
  ],
};

export type BareIngress = ScriptServer;

export interface BareIngressOptions {
  databaseUrl: string;
  organizationId: string;
  poolMax: number;
  /** Extra Node flags (e.g. --cpu-prof), before the script. */
  nodeArgs?: string[];
}

/** Spawns bench/support/ingress-bare.ts with the same Node flags as our server; resolves once it answers. */
export function spawnBareIngress(options: BareIngressOptions): Promise<BareIngress> {
  return spawnScriptServer({
    script: 'bench/support/ingress-bare.ts',
    env: {
      DATABASE_URL: options.databaseUrl,
      ORGANIZATION_ID: options.organizationId,
      POOL_MAX: String(options.poolMax),
    },
    ...(options.nodeArgs ? { nodeArgs: options.nodeArgs } : {}),
  });
}

/** Applies the bundled migrations the way our server does at boot (same code, same advisory lock). */
export async function migrateDatabase(url: string): Promise<void> {
  // Two: the migrator holds its lock on one connection while a CONCURRENTLY build runs on another.
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  const log = createLogger('warn');
  try {
    const wrapped = wrapPgCompatiblePool(
      pool as unknown as PgCompatiblePool,
      drizzle({ client: pool }),
      'app',
      log,
    );
    await migrate(wrapped, migrations, log);
  } finally {
    await pool.end();
  }
}

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  client.on('error', () => {});
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/** Rows in invoice_pushes. */
export function countPushes(url: string): Promise<number> {
  return withClient(url, async (client) => {
    const { rows } = await client.query<{ n: string }>('SELECT count(*)::text AS n FROM invoice_pushes');
    return Number(rows[0]?.n ?? Number.NaN);
  });
}

/**
 * Marks every waiting push pushed, as the push tick would have by then (no Xero here), and lets go of
 * its connection as the settle does: an organization keeps a run's invoices waiting at most.
 */
export function settleWaiting(url: string): Promise<void> {
  return withClient(url, async (client) => {
    await client.query(
      `UPDATE invoice_pushes SET status = 'pushed', connection_id = NULL, updated_at = now()
       WHERE status IN ('queued', 'failed', 'awaiting_connection')`,
    );
  });
}
