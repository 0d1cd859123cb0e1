// The Xero sandbox in process: the same app without a socket (what the fast layer's Xero calls use).
// The rest of the sandbox is tested over real HTTP in test/xero-sandbox.test.ts.
import { describe, expect, it } from 'vitest';
import { createXeroSandbox } from '../../dev/xero-sandbox/app.js';
import { inProcessFetch } from '../../dev/xero-sandbox/in-process.js';
import { sandboxInvoice } from '../support/sandbox-invoice.js';

describe('in-process use', () => {
  it('serves the same app without a socket; a drop becomes a TypeError', async () => {
    const { app, state } = createXeroSandbox();
    const fetchSandbox = inProcessFetch(app);
    const { tokens } = state.createGrant();
    const tenantId = [...state.tenants.keys()][0] as string;
    state.faults.add({ target: 'invoices', kind: 'drop' });
    const put = () =>
      fetchSandbox('/api.xro/2.0/Invoices', {
        method: 'PUT',
        headers: {
          authorization: `Bearer ${tokens.access_token}`,
          'xero-tenant-id': tenantId,
          'idempotency-key': 'k1',
        },
        body: JSON.stringify({ Invoices: [sandboxInvoice()] }),
      });
    await expect(put()).rejects.toThrow(TypeError);
    expect((await put()).status).toBe(200);
    expect(state.stats.invoicesCreated[tenantId]).toBe(1);
  });
});

describe('PKCE (RFC 7636), as Xero checks it', () => {
  const redirectUri = 'http://127.0.0.1:1/connect/xero/callback';
  const basic = `Basic ${btoa('sandbox-client:sandbox-secret')}`;
  const challengeOf = async (verifier: string) =>
    btoa(
      String.fromCharCode(
        ...new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))),
      ),
    )
      .replace(/\+/g, '-')
      .replace(/\//g, '_')
      .replace(/=+$/, '');

  it('refuses a missing or wrong code_verifier with invalid_grant, and redeems the right one', async () => {
    const { app } = createXeroSandbox();
    const fetchSandbox = inProcessFetch(app);
    const verifier = 'v'.repeat(43);
    const authorize = new URLSearchParams({
      response_type: 'code',
      client_id: 'sandbox-client',
      redirect_uri: redirectUri,
      scope: 'offline_access accounting.invoices',
      state: 's',
      code_challenge: await challengeOf(verifier),
      code_challenge_method: 'S256',
    });
    const approved = await fetchSandbox(`/identity/connect/authorize?${authorize}`, { redirect: 'manual' });
    expect(approved.status).toBe(302);
    const code = new URL(approved.headers.get('location') ?? '').searchParams.get('code') ?? '';
    const exchange = (extra: Record<string, string>) =>
      fetchSandbox('/identity/connect/token', {
        method: 'POST',
        headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code,
          redirect_uri: redirectUri,
          ...extra,
        }),
      });
    for (const extra of [{}, { code_verifier: 'w'.repeat(43) }] as Record<string, string>[]) {
      const refused = await exchange(extra);
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { error: string }).error).toBe('invalid_grant');
    }
    const ok = await exchange({ code_verifier: verifier });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { refresh_token?: string }).refresh_token).toBeTruthy();
  });
});

// Xero's "Idempotent requests" guide: "keys are stored for 6 minutes from the time of the first call,
// after which they expire"; "Key re-use is procesed per app"; an internal error "will be cached and
// returned when the request is re-run".
describe('Idempotency-Key as Xero keeps it', () => {
  const MINUTE = 60_000;

  function session(tenants = 1) {
    // A still base clock: only advance() moves the sandbox's time, to the millisecond.
    const start = Date.now();
    const { app, state } = createXeroSandbox({ now: () => start });
    const ids = Array.from({ length: tenants }, (_, i) => state.createTenant({ name: `T${i}` }).id);
    const { tokens } = state.createGrant({ tenantIds: ids });
    const fetchSandbox = inProcessFetch(app);
    const headers = (tenantId: string, key?: string) => ({
      authorization: `Bearer ${tokens.access_token}`,
      'xero-tenant-id': tenantId,
      ...(key ? { 'idempotency-key': key } : {}),
    });
    const put = (key?: string, tenantId = ids[0] as string, invoice = sandboxInvoice()) =>
      fetchSandbox('/api.xro/2.0/Invoices', {
        method: 'PUT',
        headers: headers(tenantId, key),
        body: JSON.stringify({ Invoices: [invoice] }),
      });
    const get = async (query: Record<string, string>, tenantId = ids[0] as string) => {
      const res = await fetchSandbox(`/api.xro/2.0/Invoices?${new URLSearchParams(query)}`, {
        headers: headers(tenantId),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const created = () => Object.values(state.stats.invoicesCreated).reduce((a, b) => a + b, 0);
    return { state, ids, put, get, created };
  }

  it('keeps a key for 6 minutes from its first call; a replay does not extend it; then it is new', async () => {
    const { state, put, created } = session();
    expect((await put('k')).status).toBe(200);
    state.clock.advance(5 * MINUTE);
    const replay = await put('k');
    expect(replay.headers.get('x-xero-sandbox-idempotent-replay')).toBe('true');
    state.clock.advance(MINUTE - 1);
    expect((await put('k')).headers.get('x-xero-sandbox-idempotent-replay')).toBe('true');
    expect(created()).toBe(1);
    state.clock.advance(1); // 6 minutes after the first call, though 1 minute after the last replay
    const again = await put('k');
    expect(again.status).toBe(200);
    expect(again.headers.get('x-xero-sandbox-idempotent-replay')).toBeNull();
    expect(created()).toBe(2);
  });

  it("keeps keys per app: the same key for another of the app's tenants is a different request", async () => {
    const { ids, put, created } = session(2);
    expect((await put('shared', ids[0])).status).toBe(200);
    const other = await put('shared', ids[1]);
    expect(other.status).toBe(400);
    expect(JSON.stringify(await other.json())).toMatch(/different request/);
    expect(created()).toBe(1);
  });

  it('caches an internal 500 under its key and replays it inside the window; unkeyed, nothing is kept', async () => {
    const { state, put, created } = session();
    state.faults.add({ target: 'invoices', kind: '500' });
    expect((await put('k500')).status).toBe(500);
    // The internal error is resolved, but Xero answers from the key.
    const replay = await put('k500');
    expect(replay.status).toBe(500);
    expect(replay.headers.get('x-xero-sandbox-idempotent-replay')).toBe('true');
    expect(created()).toBe(0);
    state.clock.advance(6 * MINUTE);
    expect((await put('k500')).status).toBe(200);
    expect(created()).toBe(1);

    state.faults.add({ target: 'invoices', kind: '500' });
    expect((await put()).status).toBe(500);
    expect((await put()).status).toBe(200);
    expect(state.stats).toMatchObject({ idempotentReplays: 1, faultsFired: { 500: 2 } });
  });

  it('finds an invoice by its Url with where, and pages as the spec does', async () => {
    const { put, get } = session();
    const url = (n: number) => `https://importer.example/api/invoices/${n}`;
    for (let n = 1; n <= 5; n++)
      expect((await put(`u${n}`, undefined, sandboxInvoice({ Url: url(n) }))).status).toBe(200);
    expect((await put('plain')).status).toBe(200); // no Url

    const found = await get({ where: `Url=="${url(3)}"`, page: '1' });
    expect(found.status).toBe(200);
    const invoices = found.body.Invoices as { Url?: string; InvoiceID: string }[];
    expect(invoices.map((i) => i.Url)).toEqual([url(3)]);
    expect(found.body.pagination).toEqual({ page: 1, pageSize: 100, pageCount: 1, itemCount: 1 });
    expect((await get({ where: `Url=="${url(9)}"`, page: '1' })).body.Invoices).toEqual([]);
    // An invoice without a Url is null there: it matches no string, and `!=null` leaves it out.
    expect((await get({ where: 'Url!=null' })).body.Invoices).toHaveLength(5);

    const second = await get({ where: 'Url!=null AND Type=="ACCREC"', page: '2', pageSize: '2' });
    expect(second.body.pagination).toEqual({ page: 2, pageSize: 2, pageCount: 3, itemCount: 5 });
    expect((second.body.Invoices as { Url: string }[]).map((i) => i.Url)).toEqual([url(3), url(4)]);
    expect((await get({ where: 'Url.Contains("3")' })).status).toBe(400);
  });

  it('refuses a Url that is not an absolute http(s) URL', async () => {
    const { put, created } = session();
    const res = await put('bad-url', undefined, sandboxInvoice({ Url: 'not a url' }));
    expect(res.status).toBe(400);
    expect(JSON.stringify(await res.json())).toMatch(/Url must be an absolute http or https URL/);
    expect(created()).toBe(0);
  });
});

describe('the consent page (consentPage option)', () => {
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: 'sandbox-client',
    redirect_uri: 'http://127.0.0.1:1/connect/xero/callback',
    scope: 'offline_access accounting.invoices',
    state: 'the-state',
  });
  const answer = (decision: string) =>
    new URLSearchParams([
      ...query,
      ['decision', decision],
      ['tenant', 'new'],
      ['tenant_name', 'Fresh'],
    ]).toString();
  const form = { 'content-type': 'application/x-www-form-urlencoded' };

  it('shows the tenants and a form; "Allow access" redirects with a code, "Cancel" with access_denied', async () => {
    const { app, state } = createXeroSandbox({ consentPage: true });
    const fetchSandbox = inProcessFetch(app);
    const books = state.createTenant({ name: 'Books <&> Co' });
    const page = await fetchSandbox(`/identity/connect/authorize?${query}`, { redirect: 'manual' });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain(`value="${books.id}"> Books &#60;&#38;&#62; Co</label>`);
    expect(html).toContain('<input type="hidden" name="state" value="the-state">');
    expect(html).toMatch(/<button type="submit" name="decision" value="allow">Allow access<\/button>/);
    expect(state.stats.authorizations).toBe(0);

    const post = (decision: string) =>
      fetchSandbox('/identity/connect/authorize', {
        method: 'POST',
        headers: form,
        body: answer(decision),
        redirect: 'manual',
      });
    const allowed = await post('allow');
    expect(allowed.status).toBe(302);
    const back = new URL(allowed.headers.get('location') ?? '');
    expect(back.searchParams.get('state')).toBe('the-state');
    expect(back.searchParams.get('code')).toMatch(/.+/);
    const denied = new URL((await post('deny')).headers.get('location') ?? '');
    expect(denied.searchParams.get('error')).toBe('access_denied');
    expect(state.stats.authorizations).toBe(1);
  });

  it('is off by default: GET approves at once and POST is not a route', async () => {
    const fetchSandbox = inProcessFetch(createXeroSandbox().app);
    expect((await fetchSandbox(`/identity/connect/authorize?${query}`, { redirect: 'manual' })).status).toBe(
      302,
    );
    const post = await fetchSandbox('/identity/connect/authorize', {
      method: 'POST',
      headers: form,
      body: answer('allow'),
    });
    expect(post.status).toBe(404);
  });
});
