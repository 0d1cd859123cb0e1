// The baseline for bench/ingress.ts: Hono on @hono/node-server with Drizzle over node-postgres, whose
// POST /invoices only inserts the row our POST /api/invoices writes: no auth, no validation, no
// Xero-connection lookup, no idempotency check, no RETURNING, no hashing. Run as its own process
// (`node --import tsx bench/support/ingress-bare.ts`) with DATABASE_URL (migrated), ORGANIZATION_ID,
// POOL_MAX, PORT and HOST from the environment.
import { serve } from '@hono/node-server';
import { drizzle } from 'drizzle-orm/node-postgres';
import { Hono } from 'hono';
import pg from 'pg';
import { invoicePushes } from '../../src/app/schema.js';

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}

const organizationId = required('ORGANIZATION_ID');
// The options of our app pool that matter under load: the size and how long idle clients live.
const pool = new pg.Pool({
  connectionString: required('DATABASE_URL'),
  max: Number(process.env.POOL_MAX ?? 10),
  idleTimeoutMillis: 30_000,
});
pool.on('error', (err) => console.error(JSON.stringify({ level: 'warn', msg: 'idle client failed', err })));
const db = drizzle({ client: pool });
// As wide as our sha256 hex, so the rows are the same size; the baseline itself hashes nothing.
const REQUEST_HASH = '0'.repeat(64);

const app = new Hono();
app.get('/livez', (c) => c.json({ status: 'ok' }));
app.post('/invoices', async (c) => {
  const payload: unknown = await c.req.json();
  await db.insert(invoicePushes).values({
    organizationId,
    idempotencyKey: c.req.header('idempotency-key') ?? '',
    requestHash: REQUEST_HASH,
    payload,
    status: 'awaiting_connection',
  });
  return c.json({ status: 'awaiting_connection' }, 202);
});

await pool.query('SELECT 1');
serve(
  { fetch: app.fetch, port: Number(process.env.PORT ?? 0), hostname: process.env.HOST ?? '127.0.0.1' },
  (info) => console.log(JSON.stringify({ level: 'info', msg: 'listening', port: info.port })),
);

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    setTimeout(() => process.exit(0), 2000).unref();
    void pool.end().finally(() => process.exit(0));
  });
}
