// Per-key limits and per-organization quotas (src/app/rate-limit.ts, invoices/quota.ts), and list
// pages bounded in bytes (invoices/view.ts), in process on PGlite.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadAppConfig } from '../../src/app/config.js';
import { LIST_PAGE_MAX_BYTES } from '../../src/app/invoices/routes.js';
import { listItemView } from '../../src/app/invoices/view.js';
import { createOrganization } from '../../src/app/organizations.js';
import { KeyRateLimiter } from '../../src/app/rate-limit.js';
import { type InProcessApp, startInProcess } from '../support/in-process.js';
import { invoiceBody } from '../support/orgs.js';

const RATE = 60;
const BURST = 5;
const MAX_PENDING = 12;

let app: InProcessApp;
beforeAll(async () => {
  app = await startInProcess({
    env: {
      API_RATE_PER_MINUTE: String(RATE),
      API_RATE_BURST: String(BURST),
      ORG_MAX_PENDING_INVOICES: String(MAX_PENDING),
    },
  });
});
afterAll(async () => {
  await app?.close();
});

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const post = (key: string, idempotencyKey: string, body: unknown = invoiceBody()) =>
  app.request('/api/invoices', {
    method: 'POST',
    headers: { ...bearer(key), 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
    body: JSON.stringify(body),
  });

describe('the per-key rate (GCRA)', () => {
  it(`past ${BURST} at once: 429 with Retry-After and a body naming the limit; another key is unaffected`, async () => {
    const a = await createOrganization(app.database.db, 'Busy Ltd');
    const b = await createOrganization(app.database.db, 'Quiet Ltd');
    await app.reloadIndexes();
    const statuses: number[] = [];
    for (let i = 0; i < BURST; i++) {
      statuses.push((await app.request('/api/invoices?limit=1', { headers: bearer(a.apiKey) })).status);
    }
    expect(statuses).toEqual(Array(BURST).fill(200));
    const over = await app.request('/api/invoices?limit=1', { headers: bearer(a.apiKey) });
    expect(over.status).toBe(429);
    const retryAfter = Number(over.headers.get('retry-after'));
    // One request a second at 60 a minute: the next is allowed within a second.
    expect(retryAfter).toBe(1);
    expect(await over.json()).toEqual({
      error: {
        code: 'rate_limited',
        message: `this API key is over its rate limit of ${RATE} requests a minute (bursts of ${BURST})`,
        fields: [{ path: 'Authorization', message: `at most ${RATE} requests a minute per key` }],
      },
    });
    expect((await post(a.apiKey, 'refused-by-rate')).status).toBe(429);

    expect((await app.request('/api/invoices?limit=1', { headers: bearer(b.apiKey) })).status).toBe(200);
    // A 401 is answered before the limiter: an unknown key never takes a place in its map.
    expect((await app.request('/api/invoices', { headers: bearer('hh_live_nope') })).status).toBe(401);

    await new Promise((done) => setTimeout(done, retryAfter * 1000));
    expect((await app.request('/api/invoices?limit=1', { headers: bearer(a.apiKey) })).status).toBe(200);
  });

  it('defaults to 600 a minute in bursts of 100, 10 000 pending invoices and 20 connect flows', () => {
    expect(loadAppConfig({}).limits).toEqual({
      rate: { perMinute: 600, burst: 100 },
      maxPendingInvoices: 10_000,
      maxPendingBytes: 1024 * 1024 * 1024,
      maxPendingConnectFlows: 20,
      bodiesMaxBytes: 8 * 1024 * 1024,
      clientRate: { perMinute: 60, burst: 20 },
    });
  });

  it('refills at the rate, and keeps its state bounded', () => {
    const limiter = new KeyRateLimiter({ perMinute: 600, burst: 2 }, 3);
    expect([limiter.take('k', 0), limiter.take('k', 0)].every((d) => d.allowed)).toBe(true);
    expect(limiter.take('k', 0)).toEqual({ allowed: false, retryAfterMs: 100 });
    expect(limiter.take('k', 100).allowed).toBe(true);
    for (const key of ['a', 'b', 'c', 'd']) limiter.take(key, 200);
    expect(limiter.size).toBe(3);
  });

  it('drops the least recently seen key first: a busy key keeps its state', () => {
    // One request a second, bursts of 1; room for two keys.
    const limiter = new KeyRateLimiter({ perMinute: 60, burst: 1 }, 2);
    expect(limiter.take('busy', 0).allowed).toBe(true);
    expect(limiter.take('idle', 0).allowed).toBe(true);
    expect(limiter.take('busy', 1500).allowed).toBe(true);
    // A third key drops one: the one not seen since 0, not the one just seen.
    expect(limiter.take('new', 1500).allowed).toBe(true);
    expect(limiter.take('busy', 1500).allowed).toBe(false);
    expect(limiter.take('idle', 1500).allowed).toBe(true);
  });
});

describe('quotas', () => {
  it(`ORG_MAX_PENDING_INVOICES: the ${MAX_PENDING + 1}th waiting invoice is refused, a replay still answered`, async () => {
    // An app of its own at the default rate, far above this test's pace: the quota is under test here.
    const quota = await startInProcess({ env: { ORG_MAX_PENDING_INVOICES: String(MAX_PENDING) } });
    const send = (key: string, idempotencyKey: string) =>
      quota.request('/api/invoices', {
        method: 'POST',
        headers: { ...bearer(key), 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
        body: JSON.stringify(invoiceBody()),
      });
    try {
      const org = await createOrganization(quota.database.db, 'Prolific Ltd');
      await quota.reloadIndexes();
      for (let i = 0; i < MAX_PENDING; i++) expect((await send(org.apiKey, `pending-${i}`)).status).toBe(202);
      const over = await send(org.apiKey, 'one-too-many');
      expect(over.status).toBe(429);
      expect(await over.json()).toEqual({
        error: {
          code: 'quota_exceeded',
          message: `quota ORG_MAX_PENDING_INVOICES: this organization already has ${MAX_PENDING} invoices waiting to be pushed; new ones are accepted as those finish`,
          fields: [{ path: 'quota', message: `pending invoices: at most ${MAX_PENDING}` }],
        },
      });
      expect((await send(org.apiKey, 'pending-0')).status).toBe(200);

      // Finished pushes are history: once some are pushed, there is room again.
      await quota.database.pool.query(
        "UPDATE invoice_pushes SET status = 'pushed' WHERE organization_id = $1 AND idempotency_key IN ('pending-0', 'pending-1')",
        [org.id],
      );
      await new Promise((done) => setTimeout(done, 1100));
      expect((await send(org.apiKey, 'room-again')).status).toBe(202);
    } finally {
      await quota.close();
    }
  });
});

describe('the byte quota', () => {
  it('ORG_MAX_PENDING_BYTES: an invoice that would pass it is refused 429 naming the limit', async () => {
    const small = await startInProcess({ env: { ORG_MAX_PENDING_BYTES: String(1024 * 1024) } });
    try {
      const org = await createOrganization(small.database.db, 'Heavy Ltd');
      await small.reloadIndexes();
      const big = invoiceBody({
        lineItems: Array.from({ length: 100 }, (_, i) => ({
          description: `${i} ${'x'.repeat(3990)}`,
          quantity: '1',
          unitAmount: '1.00',
        })),
      });
      const send = (key: string) =>
        small.request('/api/invoices', {
          method: 'POST',
          headers: { ...bearer(org.apiKey), 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify(big),
        });
      // About 400 KB each: two fit in 1 MiB, the third would pass it.
      expect((await send('b-1')).status).toBe(202);
      expect((await send('b-2')).status).toBe(202);
      const over = await send('b-3');
      expect(over.status).toBe(429);
      expect(await over.json()).toEqual({
        error: {
          code: 'quota_exceeded',
          message: expect.stringContaining('quota ORG_MAX_PENDING_BYTES'),
          fields: [{ path: 'quota', message: `pending invoice bytes: at most ${1024 * 1024}` }],
        },
      });
      // A replay is still answered; the stored size is what the count reads.
      expect((await send('b-1')).status).toBe(200);
      const { rows } = await small.database.pool.query<{ bytes: number }>(
        'SELECT sum(payload_bytes)::int AS bytes FROM invoice_pushes WHERE organization_id = $1',
        [org.id],
      );
      expect(rows[0]?.bytes).toBeGreaterThan(800_000);
    } finally {
      await small.close();
    }
  });
});

describe('bounded list pages', () => {
  it('a full page of the largest items the fields allow stays under LIST_PAGE_MAX_BYTES', () => {
    const item = listItemView({
      id: crypto.randomUUID(),
      status: 'awaiting_connection',
      idempotencyKey: '\\'.repeat(128), // escaped in JSON: twice its length
      requestHash: 'f'.repeat(64),
      attempts: 1000,
      nextAttemptAt: new Date(),
      // The longest the push writes: "Xero rejected the invoice: " and Xero's messages cut at 1000.
      lastError: `Xero rejected the invoice: ${'"'.repeat(1000)}`,
      xeroInvoiceId: crypto.randomUUID(),
      tenantId: crypto.randomUUID(),
      createdAt: new Date(),
      updatedAt: new Date(),
      cursorAt: '2026-12-01 22:03:59.352123+00',
    });
    const page = JSON.stringify({ data: Array(200).fill(item), nextCursor: 'x'.repeat(100) });
    expect(page.length).toBeLessThan(LIST_PAGE_MAX_BYTES);
  });

  it(`8 invoices of about 1 MiB: a page of ${200} stays under a few KiB, and each invoice is one GET away`, async () => {
    const org = await createOrganization(app.database.db, 'Heavy Ltd');
    await app.reloadIndexes();
    const big = invoiceBody({
      lineItems: Array.from({ length: 250 }, (_, i) => ({
        description: `${i} ${'x'.repeat(3990)}`,
        quantity: '1',
        unitAmount: '1.00',
      })),
    });
    const size = JSON.stringify(big).length;
    expect(size).toBeGreaterThan(1_000_000);
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) {
      let res = await post(org.apiKey, `heavy-${i}`, big);
      while (res.status === 429) {
        await new Promise((done) => setTimeout(done, 1000));
        res = await post(org.apiKey, `heavy-${i}`, big);
      }
      expect(res.status).toBe(202);
      ids.push(((await res.json()) as { id: string }).id);
    }
    await new Promise((done) => setTimeout(done, 1000));
    const list = await app.request('/api/invoices?limit=200', { headers: bearer(org.apiKey) });
    expect(list.status).toBe(200);
    const text = await list.text();
    // Before: 8.4 MB (every payload). Now each item is a few hundred bytes of bounded fields.
    expect(text.length).toBeLessThan(8 * 1024);
    expect(text.length).toBeLessThan(LIST_PAGE_MAX_BYTES);
    const page = JSON.parse(text) as { data: Record<string, unknown>[] };
    expect(page.data.map((d) => d.id).sort()).toEqual([...ids].sort());
    expect(page.data.every((d) => !('invoice' in d))).toBe(true);

    await new Promise((done) => setTimeout(done, 1000));
    const one = await app.request(`/api/invoices/${ids[0]}`, { headers: bearer(org.apiKey) });
    expect(((await one.json()) as { invoice: unknown }).invoice).toEqual(big);
  });
});
