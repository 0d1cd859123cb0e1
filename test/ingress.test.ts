import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasControlCharacter } from '../src/app/invoices/input.js';
import { migratedDatabase } from './support/databases.js';
import { createOrg, invoiceBody, waitForKey } from './support/orgs.js';
import type { Cluster } from './support/postgres.js';
import { type ServerProcess, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';

let cluster: Cluster;
let url: string;
let server: ServerProcess;
let keyA: string;
let keyB: string;
let db: pg.Pool;

beforeAll(async () => {
  cluster = sharedCluster();
  url = await migratedDatabase(cluster);
  server = await spawnServer({ env: { DATABASE_URL: url, API_KEY_REFRESH_MS: '100' } });
  await server.waitForReady();
  keyA = (await createOrg(url, 'A')).apiKey;
  keyB = (await createOrg(url, 'B')).apiKey;
  await waitForKey(server, keyA);
  await waitForKey(server, keyB);
  db = new pg.Pool({ connectionString: url, max: 2 });
});
afterAll(async () => {
  await db?.end();
  await server?.stop();
  await cluster?.remove();
});

let keyCounter = 0;
const nextKey = () => `key-${Date.now()}-${++keyCounter}`;

function post(body: string, headers: Record<string, string> = {}, apiKey = keyA) {
  return server.get('/api/invoices', {
    method: 'POST',
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      'idempotency-key': nextKey(),
      ...headers,
    },
    body,
  });
}

const rowCount = async () => Number((await db.query('SELECT count(*) AS n FROM invoice_pushes')).rows[0].n);

describe('invoice ingress: bad input', () => {
  const valid = invoiceBody();
  const many = Array.from({ length: 10_000 }, () => ({ description: 'x', quantity: '1', unitAmount: '1' }));
  const cases: {
    name: string;
    body: string;
    headers?: Record<string, string>;
    status: number;
    code: string;
    field?: string;
  }[] = [
    { name: 'invalid JSON', body: '{"contact":', status: 400, code: 'malformed_json' },
    {
      name: 'a JSON array',
      body: JSON.stringify([valid]),
      status: 422,
      code: 'validation_failed',
      field: '(body)',
    },
    {
      name: 'wrong types',
      body: JSON.stringify({ ...valid, currency: 42 }),
      status: 422,
      code: 'validation_failed',
      field: 'currency',
    },
    {
      name: 'a missing field',
      body: JSON.stringify({ ...valid, contact: undefined }),
      status: 422,
      code: 'validation_failed',
      field: 'contact',
    },
    {
      name: 'an unknown field',
      body: JSON.stringify({ ...valid, discount: '5' }),
      status: 422,
      code: 'validation_failed',
      field: 'discount',
    },
    {
      name: 'a negative amount',
      body: JSON.stringify(
        invoiceBody({ lineItems: [{ description: 'x', quantity: '1', unitAmount: '-5.00' }] }),
      ),
      status: 422,
      code: 'validation_failed',
      field: 'lineItems.0.unitAmount',
    },
    {
      name: 'a non-numeric amount',
      body: JSON.stringify(
        invoiceBody({ lineItems: [{ description: 'x', quantity: 'two', unitAmount: '5' }] }),
      ),
      status: 422,
      code: 'validation_failed',
      field: 'lineItems.0.quantity',
    },
    {
      name: 'a float amount',
      body: JSON.stringify(invoiceBody({ lineItems: [{ description: 'x', quantity: 1, unitAmount: '5' }] })),
      status: 422,
      code: 'validation_failed',
      field: 'lineItems.0.quantity',
    },
    {
      name: '10,000 line items',
      body: JSON.stringify(invoiceBody({ lineItems: many })),
      status: 422,
      code: 'validation_failed',
      field: 'lineItems',
    },
    {
      name: 'a bad date',
      body: JSON.stringify(invoiceBody({ date: '2026-02-30' })),
      status: 422,
      code: 'validation_failed',
      field: 'date',
    },
    {
      name: 'a contact name that is blank after trimming',
      body: JSON.stringify(invoiceBody({ contact: { name: ' \t ' } })),
      status: 422,
      code: 'validation_failed',
      field: 'contact.name',
    },
    {
      name: 'a currency that is not ISO 4217',
      body: JSON.stringify(invoiceBody({ currency: 'ABC' })),
      status: 422,
      code: 'validation_failed',
      field: 'currency',
    },
    {
      name: 'an amount with 5 decimal places',
      body: JSON.stringify(
        invoiceBody({ lineItems: [{ description: 'x', quantity: '1', unitAmount: '1.12345' }] }),
      ),
      status: 422,
      code: 'validation_failed',
      field: 'lineItems.0.unitAmount',
    },
    {
      name: 'an amount with 12 digits before the point',
      body: JSON.stringify(
        invoiceBody({ lineItems: [{ description: 'x', quantity: '123456789012', unitAmount: '1' }] }),
      ),
      status: 422,
      code: 'validation_failed',
      field: 'lineItems.0.quantity',
    },
    {
      name: 'a control character',
      body: JSON.stringify(invoiceBody({ reference: 'a\u0000b' })),
      status: 422,
      code: 'validation_failed',
      field: 'reference',
    },
    {
      name: 'a 2 MiB body',
      body: JSON.stringify(invoiceBody({ reference: 'x'.repeat(2 * 1024 * 1024) })),
      status: 413,
      code: 'payload_too_large',
    },
    {
      name: 'a wrong content type',
      body: JSON.stringify(valid),
      headers: { 'content-type': 'text/plain' },
      status: 415,
      code: 'unsupported_media_type',
    },
    {
      name: 'a 129-character Idempotency-Key',
      body: JSON.stringify(valid),
      headers: { 'idempotency-key': 'k'.repeat(129) },
      status: 400,
      code: 'invalid_idempotency_key',
      field: 'Idempotency-Key',
    },
    {
      name: 'an Idempotency-Key with a control character',
      body: JSON.stringify(valid),
      headers: { 'idempotency-key': 'a\tb' },
      status: 400,
      code: 'invalid_idempotency_key',
      field: 'Idempotency-Key',
    },
    {
      name: 'no Idempotency-Key',
      body: JSON.stringify(valid),
      headers: { 'idempotency-key': '' },
      status: 400,
      code: 'invalid_idempotency_key',
      field: 'Idempotency-Key',
    },
  ];

  for (const c of cases) {
    it(`rejects ${c.name} with ${c.status} ${c.code} and writes nothing`, async () => {
      const before = await rowCount();
      const res = await post(c.body, c.headers);
      expect(res.status).toBe(c.status);
      const body = (await res.json()) as {
        error: { code: string; message: string; fields?: { path: string }[] };
      };
      expect(body.error.code).toBe(c.code);
      expect(body.error.message).toEqual(expect.any(String));
      if (c.field) expect(body.error.fields?.map((f) => f.path)).toContain(c.field);
      expect(await rowCount()).toBe(before);
    });
  }

  it('rejects a chunked 2 MiB body, whose size is only known while reading it, with 413', async () => {
    const before = await rowCount();
    const chunk = new TextEncoder().encode('x'.repeat(64 * 1024));
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 2 * 1024 * 1024) return controller.close();
        sent += chunk.length;
        controller.enqueue(chunk);
      },
    });
    const chunked = await fetch(`${server.url}/api/invoices`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${keyA}`,
        'content-type': 'application/json',
        'idempotency-key': nextKey(),
      },
      body,
      duplex: 'half',
    } as RequestInit);
    expect(chunked.status).toBe(413);
    expect(((await chunked.json()) as { error: { code: string } }).error.code).toBe('payload_too_large');
    expect(await rowCount()).toBe(before);
  });

  it('stores SQL-looking and non-ASCII strings intact', async () => {
    const body = invoiceBody({
      contact: { name: "Robert'); DROP TABLE invoice_pushes;--" },
      reference: 'Ünïcødé ✓ 日本語 🧾 \\x00 %s $1',
      lineItems: [{ description: "' OR 1=1 --\nsecond line\ttab", quantity: '1', unitAmount: '0.0001' }],
    });
    const res = await post(JSON.stringify(body));
    expect(res.status).toBe(202);
    const created = (await res.json()) as { id: string };
    const read = await server.get(`/api/invoices/${created.id}`, {
      headers: { authorization: `Bearer ${keyA}` },
    });
    expect(((await read.json()) as { invoice: unknown }).invoice).toEqual(body);
  });

  it('requires a valid API key', async () => {
    for (const authorization of [undefined, 'Bearer nope', `Bearer ${keyA}x`, `Basic ${keyA}`]) {
      const res = await server.get('/api/invoices', authorization ? { headers: { authorization } } : {});
      expect(res.status).toBe(401);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('unauthorized');
    }
  });
});

describe('invoice ingress: idempotency and isolation', () => {
  it('replays the same key and body, and refuses the same key with another body', async () => {
    const key = nextKey();
    const first = await post(JSON.stringify(invoiceBody()), { 'idempotency-key': key });
    expect(first.status).toBe(202);
    const again = await post(JSON.stringify(invoiceBody()), { 'idempotency-key': key });
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual(await first.json());
    const other = await post(JSON.stringify(invoiceBody({ currency: 'AUD' })), { 'idempotency-key': key });
    expect(other.status).toBe(409);
  });

  // The 202 and its replay are built with their headers in (jsonAnswer), not given them afterwards:
  // through the Node adapter they must still carry every one, and the id the caller sent.
  it('answers a POST and its replay with the request id, no-store, nosniff and JSON', async () => {
    const key = nextKey();
    const body = JSON.stringify(invoiceBody());
    const first = await post(body, { 'idempotency-key': key, 'x-request-id': 'ingress-headers-1' });
    const again = await post(body, { 'idempotency-key': key });
    for (const [name, res] of Object.entries({ first, again })) {
      expect(res.headers.get('cache-control'), name).toBe('no-store');
      expect(res.headers.get('x-content-type-options'), name).toBe('nosniff');
      expect(res.headers.get('content-type'), name).toBe('application/json');
      expect(Number(res.headers.get('content-length')), name).toBe(Buffer.byteLength(await res.text()));
    }
    expect([first.status, again.status]).toEqual([202, 200]);
    expect(first.headers.get('x-request-id')).toBe('ingress-headers-1');
    expect(again.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('creates one push for concurrent POSTs with one key', async () => {
    const key = nextKey();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => post(JSON.stringify(invoiceBody()), { 'idempotency-key': key })),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([...Array(19).fill(200), 202]);
    const ids = new Set(await Promise.all(answers.map(async (a) => ((await a.json()) as { id: string }).id)));
    expect(ids.size).toBe(1);
    const { rows } = await db.query(
      'SELECT count(*)::int AS n FROM invoice_pushes WHERE idempotency_key = $1',
      [key],
    );
    expect(rows[0].n).toBe(1);
  });

  it('keeps organizations apart: 404 for another organization’s invoice, lists only its own', async () => {
    const res = await post(JSON.stringify(invoiceBody()), {}, keyB);
    const { id } = (await res.json()) as { id: string };
    const asA = await server.get(`/api/invoices/${id}`, { headers: { authorization: `Bearer ${keyA}` } });
    expect(asA.status).toBe(404);
    const asB = await server.get(`/api/invoices/${id}`, { headers: { authorization: `Bearer ${keyB}` } });
    expect(asB.status).toBe(200);
    const listA = (await (
      await server.get('/api/invoices?limit=200', { headers: { authorization: `Bearer ${keyA}` } })
    ).json()) as { data: { id: string }[] };
    expect(listA.data.map((i) => i.id)).not.toContain(id);
  });

  it('pages through the list with a cursor, newest first, without gaps or repeats', async () => {
    const org = await createOrg(url, 'Pager');
    await waitForKey(server, org.apiKey);
    const created: string[] = [];
    for (let i = 0; i < 7; i++) {
      const res = await post(JSON.stringify(invoiceBody({ reference: `n${i}` })), {}, org.apiKey);
      created.push(((await res.json()) as { id: string }).id);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor ? `?limit=3&cursor=${encodeURIComponent(cursor)}` : '?limit=3';
      const page = (await (
        await server.get(`/api/invoices${query}`, { headers: { authorization: `Bearer ${org.apiKey}` } })
      ).json()) as { data: { id: string }[]; nextCursor: string | null };
      seen.push(...page.data.map((i) => i.id));
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen).toEqual([...created].reverse());
    const bad = await server.get('/api/invoices?cursor=garbage', {
      headers: { authorization: `Bearer ${org.apiKey}` },
    });
    expect(bad.status).toBe(400);
  });
});

describe('invoice ingress: properties', () => {
  const decimal = fc
    .tuple(fc.bigInt({ min: 0n, max: 99_999_999_999n }), fc.option(fc.integer({ min: 0, max: 9999 })))
    .map(([whole, frac]) => (frac === null ? `${whole}` : `${whole}.${String(frac).padStart(4, '0')}`));
  const safeText = (max: number) =>
    fc.string({ minLength: 1, maxLength: max, unit: 'grapheme' }).filter((s) => !hasControlCharacter(s));
  const validInvoice = fc.record(
    {
      contact: fc.record({ name: safeText(40).filter((s) => s.trim() !== '') }),
      lineItems: fc.array(fc.record({ description: safeText(40), quantity: decimal, unitAmount: decimal }), {
        minLength: 1,
        maxLength: 5,
      }),
      date: fc.constantFrom('2026-01-31', '2026-11-29', '2024-02-29'),
      currency: fc.constantFrom('NZD', 'AUD', 'USD'),
      reference: safeText(60),
    },
    { requiredKeys: ['contact', 'lineItems', 'date', 'currency'] },
  );

  it('round-trips every accepted invoice unchanged', async () => {
    await fc.assert(
      fc.asyncProperty(validInvoice, async (invoice) => {
        const res = await post(JSON.stringify(invoice));
        expect(res.status).toBe(202);
        const { id } = (await res.json()) as { id: string };
        const read = await server.get(`/api/invoices/${id}`, {
          headers: { authorization: `Bearer ${keyA}` },
        });
        expect(((await read.json()) as { invoice: unknown }).invoice).toEqual(invoice);
      }),
      { numRuns: 40 },
    );
  });

  it('writes nothing for a rejected invoice', async () => {
    const broken = fc.oneof(
      validInvoice.map((i) => ({ ...i, currency: i.currency.toLowerCase() })),
      validInvoice.map((i) => ({ ...i, lineItems: [] })),
      validInvoice.map((i) => ({ ...i, extra: true })),
      validInvoice.map((i) => ({
        ...i,
        lineItems: i.lineItems.map((l) => ({ ...l, quantity: `-${l.quantity}` })),
      })),
      fc.anything(),
    );
    await fc.assert(
      fc.asyncProperty(broken, async (body) => {
        const before = await rowCount();
        const res = await post(JSON.stringify(body) ?? 'undefined');
        expect([400, 422]).toContain(res.status);
        expect(await rowCount()).toBe(before);
      }),
      { numRuns: 40 },
    );
  });
});
