// A lone UTF-16 surrogate in any string field of an invoice: JSON text may carry
// one ("\ud800"), JSON.parse accepts it, and Postgres refuses it in jsonb (22P02). It must be a 422
// naming the field, on Node and on Bun, with nothing written. Any other input the database refuses
// (SQLSTATE class 22) is a 422 as well, never a 500.
import { resolve } from 'node:path';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, refusedInput } from '../src/app/errors.js';
import { migratedDatabase } from './support/databases.js';
import { createOrg, invoiceBody, waitForKey } from './support/orgs.js';
import type { Cluster } from './support/postgres.js';
import { repoRoot, type ServerProcess, type SpawnOptions, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';

const runtimes: Record<'node' | 'bun', SpawnOptions> = {
  node: {},
  bun: {
    command: resolve(repoRoot, 'node_modules/.bin/bun'),
    args: [resolve(repoRoot, 'src/runtime/bun.ts')],
  },
};

let cluster: Cluster;
beforeAll(async () => {
  cluster = sharedCluster();
});
afterAll(async () => {
  await cluster?.remove();
});

// JSON text, so the escapes reach the server as written: JSON.stringify would keep them too, but the
// point is what a client can send.
const LONE = ['\\ud800', '\\udfff', '\\udc00\\ud800'];
const fields: { path: string; body: (s: string) => string }[] = [
  { path: 'contact.name', body: (s) => withString(invoiceBody({ contact: { name: '@@' } }), s) },
  {
    path: 'lineItems.0.description',
    body: (s) =>
      withString(invoiceBody({ lineItems: [{ description: '@@', quantity: '1', unitAmount: '1' }] }), s),
  },
  {
    path: 'lineItems.0.accountCode',
    body: (s) =>
      withString(
        invoiceBody({ lineItems: [{ description: 'x', quantity: '1', unitAmount: '1', accountCode: '@@' }] }),
        s,
      ),
  },
  { path: 'reference', body: (s) => withString(invoiceBody({ reference: 'INV-@@' }), s) },
];
const withString = (body: object, escaped: string) => JSON.stringify(body).replace('@@', `a${escaped}b`);

describe.each(Object.keys(runtimes) as (keyof typeof runtimes)[])('%s on Postgres', (name) => {
  let server: ServerProcess;
  let db: pg.Pool;
  let apiKey: string;
  beforeAll(async () => {
    const url = await migratedDatabase(cluster);
    server = await spawnServer({ ...runtimes[name], env: { DATABASE_URL: url, API_KEY_REFRESH_MS: '100' } });
    await server.waitForReady();
    apiKey = (await createOrg(url, 'Surrogates Ltd')).apiKey;
    await waitForKey(server, apiKey);
    db = new pg.Pool({ connectionString: url, max: 1 });
  });
  afterAll(async () => {
    await db?.end();
    await server?.stop();
  });

  let n = 0;
  const post = (body: string) =>
    server.get('/api/invoices', {
      method: 'POST',
      headers: {
        authorization: `Bearer ${apiKey}`,
        'content-type': 'application/json',
        'idempotency-key': `surrogate-${++n}`,
      },
      body,
    });
  const rows = async () => Number((await db.query('SELECT count(*) AS n FROM invoice_pushes')).rows[0].n);

  it.each(fields.flatMap((f) => LONE.map((s) => [f.path, s, f] as const)))(
    'answers 422 naming %s for %s, and writes nothing',
    async (path, escaped, field) => {
      const before = await rows();
      const res = await post(field.body(escaped));
      const body = (await res.json()) as {
        error: { code: string; fields?: { path: string; message: string }[] };
      };
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(body.error.code).toBe('validation_failed');
      expect(body.error.fields).toEqual([
        { path, message: 'must be well-formed Unicode (no lone surrogates)' },
      ]);
      expect(await rows()).toBe(before);
    },
  );

  it('accepts a well-formed surrogate pair (an emoji) in every field', async () => {
    const before = await rows();
    const body = invoiceBody({
      contact: { name: 'Café 😀' },
      lineItems: [{ description: '𝄞 music', quantity: '1', unitAmount: '1', accountCode: '😀' }],
      reference: '🧾',
    });
    const res = await post(JSON.stringify(body));
    expect(res.status).toBe(202);
    expect(await rows()).toBe(before + 1);
    const stored = await db.query('SELECT payload FROM invoice_pushes ORDER BY created_at DESC LIMIT 1');
    expect(stored.rows[0].payload.contact.name).toBe('Café 😀');
  });
});

describe('class 22 from the database', () => {
  it('is refused input (422), whatever the statement, through Drizzle and straight from pg', async () => {
    const pool = new pg.Pool({ connectionString: await migratedDatabase(cluster), max: 1 });
    try {
      const orm = drizzle({ client: pool });
      const statements = [
        sql`SELECT ${'{"a":"\\ud800"}'}::jsonb`, // 22P02 invalid input syntax for type json
        sql`SELECT ${'not-a-uuid'}::uuid`, // 22P02
        sql`SELECT ${'2026-02-30'}::date`, // 22008 date/time field value out of range
        sql`SELECT 1 / 0`, // 22012 division by zero
        sql`SELECT ${'123.45'}::numeric(3,1)`, // 22003 numeric field overflow
        sql`SELECT ${'a\u0000b'}::text`, // 22021 invalid byte sequence for encoding
      ];
      for (const statement of statements) {
        const err = await orm.execute(statement).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err, String(statement.queryChunks)).toBeDefined();
        const refused = refusedInput(err);
        expect(refused).toBeInstanceOf(ApiError);
        expect(refused?.status).toBe(422);
        expect(refused?.code).toBe('invalid_input');
      }
      // Not class 22: a bug (42P01) and a constraint (23505) stay what they are.
      expect(
        refusedInput(await orm.execute(sql`SELECT * FROM nowhere`).catch((e: unknown) => e)),
      ).toBeUndefined();
      expect(refusedInput(new Error('plain'))).toBeUndefined();
    } finally {
      await pool.end();
    }
  });
});
