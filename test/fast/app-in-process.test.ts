// The app called in process: honest-health's module inside the platform's HTTP shell, on an in-memory
// PGlite (test/support/in-process.ts). The same routes the spawned servers of the integration layer
// serve, without a socket, a child process or a cluster.

import type { DatabaseDriver } from '@honest-health/platform';
import { createSecretBox } from '@honest-health/platform/crypto';
import { ReadinessGate } from '@honest-health/platform/internal/http/gate';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveGrant } from '../../src/app/connections/grants.js';
import { createOrganization } from '../../src/app/organizations.js';
import { type InProcessApp, startInProcess } from '../support/in-process.js';
import { invoiceBody } from '../support/orgs.js';
import { TEST_TOKEN_KEY } from '../support/server.js';

let app: InProcessApp;
let apiKey: string;
let otherKey: string;

beforeAll(async () => {
  app = await startInProcess();
  apiKey = (await createOrganization(app.database.db, 'In Process Ltd')).apiKey;
  otherKey = (await createOrganization(app.database.db, 'Other Org')).apiKey;
  await app.reloadIndexes();
});
afterAll(async () => {
  await app?.close();
});

let keys = 0;
function post(body: unknown, headers: Record<string, string> = {}) {
  return app.request('/api/invoices', {
    method: 'POST',
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      'idempotency-key': `fast-${++keys}`,
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}
const get = (path: string, key = apiKey) =>
  app.request(path, { headers: { authorization: `Bearer ${key}` } });

describe('health in process', () => {
  it('answers liveness with the database not there at all, and readiness 503 without a ready database', async () => {
    const touched: string[] = [];
    const absent: DatabaseDriver = {
      name: 'absent',
      createPool: () => {
        touched.push('createPool');
        throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
      },
      ready: async () => void touched.push('ready'),
      close: async () => {},
    };
    const down = await startInProcess({ driver: absent });
    try {
      for (const path of ['/livez', '/health', '/healthz']) {
        const res = await down.request(path);
        expect(res.status, path).toBe(200);
        expect(await res.json()).toEqual({ status: 'ok' });
      }
      expect(touched).toEqual([]);
      const ready = await down.request('/readyz');
      expect(ready.status).toBe(503);
      expect(await ready.json()).toEqual({
        status: 'unavailable',
        checks: { boot: 'ok', database: 'unreachable' },
      });
    } finally {
      await down.close();
    }
  });

  it('answers readiness 200 when the database takes a write, and 503 while booting', async () => {
    const res = await app.request('/readyz');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok', checks: { boot: 'ok', database: 'ok' } });
    const { rows } = await app.database.pool.query<{ beats: number }>(
      "SELECT beats FROM health_heartbeat WHERE instance_id = 'fast-layer'",
    );
    expect(rows[0]?.beats).toBeGreaterThanOrEqual(1);

    // Another boot of the same app on the same database, its gate not opened yet.
    const booting = app.behind(new ReadinessGate());
    const closed = await booting('/readyz');
    expect(closed.status).toBe(503);
    expect(await closed.json()).toEqual({
      status: 'unavailable',
      checks: { boot: 'booting', database: 'ok' },
    });
    // Liveness never waits for boot.
    expect((await booting('/livez')).status).toBe(200);
  });
});

describe('POST /api/invoices in process', () => {
  it('queues an invoice with a real API key: 202, stored and readable; it awaits a Xero connection', async () => {
    const before = app.scheduled.length;
    const res = await post(invoiceBody({ reference: 'PO-1' }));
    expect(res.status).toBe(202);
    const text = await res.text();
    const created = JSON.parse(text) as { id: string; status: string; invoice?: unknown };
    // The id, status and where to read it; never the invoice back.
    expect(created).toMatchObject({
      status: 'awaiting_connection',
      links: { self: `/api/invoices/${created.id}` },
    });
    expect(created.invoice).toBeUndefined();
    // Nothing to push yet: no tick is asked for.
    expect(app.scheduled.slice(before)).toEqual([]);
    const read = await get(`/api/invoices/${created.id}`);
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({ id: created.id, status: 'awaiting_connection' });
    // Another organization's key does not see it.
    expect((await get(`/api/invoices/${created.id}`, otherKey)).status).toBe(404);
  });

  it('a new connection receives nothing until chosen; /default routes to it, tenantId must be chosen', async () => {
    const org = await createOrganization(app.database.db, 'Connected Ltd');
    await app.reloadIndexes();
    const auth = { authorization: `Bearer ${org.apiKey}` };
    const box = await createSecretBox(TEST_TOKEN_KEY);
    const [tenantId, otherTenant] = [crypto.randomUUID(), crypto.randomUUID()];
    const saved = await saveGrant(app.database.db, box, {
      organizationId: org.id,
      authEventId: null,
      scope: 'offline_access accounting.invoices',
      tokens: { accessToken: 'access', refreshToken: 'refresh', expiresAt: new Date(Date.now() + 1_800_000) },
      tenants: [
        { tenantId, tenantName: 'Connected', connectionId: null, authEventId: null },
        { tenantId: otherTenant, tenantName: 'Other books', connectionId: null, authEventId: null },
      ],
    });
    const [first, second] = saved.connected;
    // Connected but unchosen: the invoice waits, saying what to do, and no tick is asked for.
    const before = app.scheduled.length;
    const waiting = await post(invoiceBody(), auth);
    expect(waiting.status).toBe(202);
    const parked = (await waiting.json()) as { id: string };
    expect(parked).toMatchObject({
      status: 'awaiting_connection',
      tenantId: null,
      lastError: expect.stringMatching(/^no Xero tenant chosen: POST \/api\/connections\/\{id\}\/default/),
    });
    expect(app.scheduled.slice(before)).toEqual([]);
    // A tenantId that is no Xero tenant id at all is a 422 naming it too.
    const malformed = await post(invoiceBody({ tenantId: 'not-a-tenant' }), auth);
    expect(malformed.status).toBe(422);
    expect(await malformed.json()).toMatchObject({
      error: { fields: [{ path: 'tenantId', message: 'must be a Xero tenant id (a UUID)' }] },
    });
    // Naming a tenant nobody chose is a 422 naming the field, and stores nothing.
    const refused = await post(invoiceBody({ tenantId }), { ...auth, 'idempotency-key': 'named-early' });
    expect(refused.status).toBe(422);
    expect(await refused.json()).toMatchObject({
      error: { code: 'validation_failed', fields: [{ path: 'tenantId' }] },
    });
    const listed = (await (await get('/api/invoices', org.apiKey)).json()) as { data: { id: string }[] };
    expect(listed.data.map((i) => i.id)).toEqual([parked.id]);
    expect((await get('/api/connections', org.apiKey).then((r) => r.json())) as unknown).toMatchObject({
      data: [
        { id: first?.id, chosen: false, default: false },
        { id: second?.id, chosen: false, default: false },
      ],
    });
    // Another organization's key cannot choose it.
    const foreign = await app.request(`/api/connections/${first?.id}/default`, {
      method: 'POST',
      headers: { authorization: `Bearer ${otherKey}` },
    });
    expect(foreign.status).toBe(404);

    const chosen = await app.request(`/api/connections/${first?.id}/default`, {
      method: 'POST',
      headers: auth,
    });
    expect(chosen.status).toBe(200);
    expect(await chosen.json()).toMatchObject({ id: first?.id, tenantId, chosen: true, default: true });
    // The waiting invoice is bound to the default and queued, and a push is asked for at once.
    expect(app.scheduled.slice(before)).toEqual(['push-invoices']);
    expect(await (await get(`/api/invoices/${parked.id}`, org.apiKey)).json()).toMatchObject({
      status: 'queued',
      tenantId,
      lastError: null,
    });
    const queued = await post(invoiceBody(), auth);
    expect(queued.status).toBe(202);
    expect(await queued.json()).toMatchObject({ status: 'queued', tenantId });
    expect(app.scheduled.slice(before)).toEqual(['push-invoices', 'push-invoices']);
    // The second tenant, named, needs choosing too; then it takes only the invoices that name it.
    expect((await post(invoiceBody({ tenantId: otherTenant }), auth)).status).toBe(422);
    const choose = await app.request(`/api/connections/${second?.id}/choose`, {
      method: 'POST',
      headers: auth,
    });
    expect(await choose.json()).toMatchObject({ chosen: true, default: false });
    const named = await post(invoiceBody({ tenantId: otherTenant.toUpperCase() }), auth);
    expect(named.status).toBe(202);
    expect(await named.json()).toMatchObject({ status: 'queued', tenantId: otherTenant });
    expect((await get(`/api/connections/${crypto.randomUUID()}`, org.apiKey)).status).toBe(405);
    expect(
      (await app.request(`/api/connections/${crypto.randomUUID()}/choose`, { method: 'POST', headers: auth }))
        .status,
    ).toBe(404);
    expect(
      (await app.request('/api/connections/not-a-uuid/default', { method: 'POST', headers: auth })).status,
    ).toBe(404);
  });

  it('replays the same key and body with 200, and refuses the same key with another body', async () => {
    const headers = { 'idempotency-key': 'replayed-key' };
    expect((await post(invoiceBody(), headers)).status).toBe(202);
    expect((await post(invoiceBody(), headers)).status).toBe(200);
    const conflict = await post(invoiceBody({ reference: 'other' }), headers);
    expect(conflict.status).toBe(409);
    expect(await conflict.json()).toMatchObject({ error: { code: 'idempotency_conflict' } });
  });

  it('answers 401 without a key, or with a key it does not know', async () => {
    for (const authorization of [undefined, 'Bearer hh_live_unknown', `Basic ${apiKey}`, apiKey]) {
      const res = await app.request('/api/invoices', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'idempotency-key': `k-${++keys}`,
          ...(authorization ? { authorization } : {}),
        },
        body: JSON.stringify(invoiceBody()),
      });
      expect(res.status, String(authorization)).toBe(401);
      expect(await res.json()).toMatchObject({ error: { code: 'unauthorized' } });
    }
  });

  it('answers bad input with a status and a body naming the field, and stores nothing', async () => {
    const count = async () =>
      Number(
        (await app.database.pool.query<{ n: string }>('SELECT count(*) AS n FROM invoice_pushes')).rows[0]?.n,
      );
    const before = await count();

    const noKey = await post(invoiceBody(), { 'idempotency-key': '' });
    expect(noKey.status).toBe(400);
    expect(await noKey.json()).toMatchObject({
      error: { code: 'invalid_idempotency_key', fields: [{ path: 'Idempotency-Key' }] },
    });

    const malformed = await post('{"contact": ');
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ error: { code: 'malformed_json' } });

    const invalid = await post({
      ...invoiceBody({ currency: 'nzd' }),
      lineItems: [{ description: 'Widget', quantity: '-2', unitAmount: '10.50' }],
    });
    expect(invalid.status).toBe(422);
    const { error } = (await invalid.json()) as { error: { code: string; fields: { path: string }[] } };
    expect(error.code).toBe('validation_failed');
    expect(error.fields.map((f) => f.path).sort()).toEqual(['currency', 'lineItems.0.quantity']);

    const notJson = await post(JSON.stringify(invoiceBody()), { 'content-type': 'text/plain' });
    expect(notJson.status).toBe(415);
    expect(await count()).toBe(before);
  });
});

describe('/readyz?verbose in process', () => {
  // Open to anyone: latency, a short reason and the durability verdict, never the standbys' names.
  it('shows what an operator needs, and not synchronous_standby_names', async () => {
    const res = await app.request('/readyz?verbose');
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({
      status: 'ok',
      checks: { boot: 'ok', database: 'ok' },
      details: {
        boot: { state: 'ok' },
        database: {
          latency_ms: expect.any(Number),
          replication: { synchronous_commit: 'on', commit_waits_for_standby: false },
        },
      },
    });
    expect(text).not.toContain('standby_names');
  });
});

describe('API answers in process', () => {
  // Every answer under /api and /connect, the errors the shell writes included: none may be cached on
  // the way, and none sniffed by a browser into something other than JSON.
  it('carry cache-control: no-store and x-content-type-options: nosniff, errors included', async () => {
    const answers = {
      list: await get('/api/invoices'),
      created: await post(invoiceBody()),
      invalid: await post({}),
      badQuery: await get('/api/invoices?limit=0'),
      noKey: await app.request('/api/invoices'),
      noRoute: await get('/api/nothing-here'),
      connectNoKey: await app.request('/connect/xero'),
      callback: await app.request('/connect/xero/callback?state=forged&code=x'),
    };
    for (const [name, res] of Object.entries(answers)) {
      expect(res.status, name).toBeGreaterThanOrEqual(200);
      expect(res.headers.get('cache-control'), name).toBe('no-store');
      expect(res.headers.get('x-content-type-options'), name).toBe('nosniff');
    }
    expect(answers.list.status).toBe(200);
    expect(answers.created.status).toBe(202);
    expect(answers.noKey.status).toBe(401);
    expect(answers.noRoute.status).toBe(404);
  });
});

describe('GET /api/invoices in process', () => {
  it('pages newest first with a cursor, without gaps or repeats, and refuses a cursor it did not make', async () => {
    const org = await createOrganization(app.database.db, 'Paging Ltd');
    await app.reloadIndexes();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await post(invoiceBody({ reference: `page-${i}` }), {
        authorization: `Bearer ${org.apiKey}`,
      });
      ids.push(((await res.json()) as { id: string }).id);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor === null ? '' : `&cursor=${cursor}`;
      const res = await get(`/api/invoices?limit=2${query}`, org.apiKey);
      expect(res.status).toBe(200);
      const page = (await res.json()) as { data: { id: string }[]; nextCursor: string | null };
      seen.push(...page.data.map((p) => p.id));
      cursor = page.nextCursor;
    } while (cursor !== null);
    expect(seen).toEqual([...ids].reverse());

    // Not made here, or made to look like ours with a time that does not exist (docs/api.md: 400).
    const impossible = btoa(JSON.stringify(['2026-13-45 10:00:00+00', ids[0]])).replace(/=+$/, '');
    for (const cursor of ['not-a-cursor', impossible]) {
      const bad = await get(`/api/invoices?cursor=${cursor}`, org.apiKey);
      expect(bad.status, cursor).toBe(400);
      expect(await bad.json()).toMatchObject({
        error: { code: 'invalid_query', fields: [{ path: 'cursor' }] },
      });
    }
  });
});

describe('a database that turns read-only, in process', () => {
  it('readiness says read_only, a write answers 503 with Retry-After (never 500), and both recover', async () => {
    await app.database.pool.query('SET default_transaction_read_only = on');
    try {
      const ready = await app.request('/readyz');
      expect(ready.status).toBe(503);
      expect(await ready.json()).toEqual({
        status: 'unavailable',
        checks: { boot: 'ok', database: 'read_only' },
      });
      const write = await post(invoiceBody({ reference: 'during' }));
      expect(write.status).toBe(503);
      expect(write.headers.get('retry-after')).toBe('1');
      expect(await write.json()).toMatchObject({ error: { code: 'database_unavailable' } });
    } finally {
      await app.database.pool.query('SET default_transaction_read_only = off');
    }
    expect((await app.request('/readyz')).status).toBe(200);
    expect((await post(invoiceBody({ reference: 'after' }))).status).toBe(202);
  });
});
