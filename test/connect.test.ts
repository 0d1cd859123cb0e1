import { sha256Hex } from '@honest-health/platform/crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { Browser } from './support/browser.js';
import { migratedDatabase } from './support/databases.js';
import { createOrg, invoiceBody, waitForKey } from './support/orgs.js';
import { freePort } from './support/ports.js';
import type { Cluster } from './support/postgres.js';
import { type ServerProcess, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import { type Sandbox, sandboxEnv } from './support/ticks.js';
import { until } from './support/until.js';

let cluster: Cluster;
let sandbox: Sandbox;
let server: ServerProcess;
let url: string;

beforeAll(async () => {
  [cluster, sandbox] = await Promise.all([sharedCluster(), startXeroSandbox({ port: 0 })]);
  url = await migratedDatabase(cluster);
  const port = await freePort();
  server = await spawnServer({
    port,
    env: {
      DATABASE_URL: url,
      API_KEY_REFRESH_MS: '100',
      TICK_INTERVAL_MS: '60000',
      // Every request here comes from one address: the per-address limit is tested on its own.
      CONNECT_RATE_PER_MINUTE: '1000000',
      CONNECT_RATE_BURST: '100000',
      ...sandboxEnv(sandbox),
      XERO_REDIRECT_URI: `http://127.0.0.1:${port}/connect/xero/callback`,
    },
  });
  await server.waitForReady();
});
afterAll(async () => {
  await server?.stop();
  await sandbox?.close();
  await cluster?.remove();
});

const auth = (key: string) => ({ authorization: `Bearer ${key}` });
const asJson = { accept: 'application/json' };
/** The organization chooses a connection as its default (until then it receives nothing). */
const makeDefault = (key: string, connectionId: string | undefined) =>
  server.get(`/api/connections/${connectionId}/default`, { method: 'POST', headers: auth(key) });

/** POST /api/connect-links: the one-time link a browser opens. */
async function mintLink(key: string): Promise<string> {
  const res = await server.get('/api/connect-links', { method: 'POST', headers: auth(key) });
  expect(res.status).toBe(201);
  return ((await res.json()) as { url: string }).url;
}

/** Queues what the user does on Xero's consent page: which tenants they tick (and what Xero grants). */
function planConsent(plan: { tenantIds?: string[]; grantScope?: string } = {}): void {
  sandbox.state.authorizePlans.push({
    deny: false,
    tenantIds: plan.tenantIds ?? [sandbox.state.createTenant({ name: `Tenant ${crypto.randomUUID()}` }).id],
    grantScope: plan.grantScope ?? null,
  });
}

/**
 * A browser opens a link: a page that spends nothing (a mail scanner's prefetch sees only this), whose
 * button POSTs back; then our redirect to Xero, with the flow's state and PKCE challenge.
 */
async function openLink(browser: Browser, link: string): Promise<URL> {
  const page = await browser.fetch(link);
  expect(page.status).toBe(200);
  expect(await page.text()).toMatch(/<form method="post" action="\?link=[A-Za-z0-9_-]{43}">/);
  const start = await spendLink(browser, link);
  expect(start.status).toBe(303);
  const toXero = new URL(start.headers.get('location') ?? '');
  expect(toXero.origin + toXero.pathname).toBe(`${sandbox.url}/identity/connect/authorize`);
  expect(toXero.searchParams.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(toXero.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(toXero.searchParams.get('code_challenge_method')).toBe('S256');
  return toXero;
}

/** The confirm page's button: POST to the link's own address. */
const spendLink = (browser: Browser, link: string, init: RequestInit = {}) =>
  browser.fetch(link, { ...init, method: 'POST' });

/** Xero's (auto-approving) consent page redirects back to our callback with a code and the state. */
async function consent(toXero: URL, plan: Parameters<typeof planConsent>[0] = {}): Promise<URL> {
  planConsent(plan);
  const approved = await fetch(toXero, { redirect: 'manual' });
  expect(approved.status).toBe(302);
  return new URL(approved.headers.get('location') ?? '');
}

interface Flow {
  browser: Browser;
  callback: URL;
}

/** The whole browser part for the organization's own user: mint, open, consent. */
async function authorize(key: string, plan: Parameters<typeof planConsent>[0] = {}): Promise<Flow> {
  const browser = new Browser();
  const callback = await consent(await openLink(browser, await mintLink(key)), plan);
  return { browser, callback };
}

/** The browser lands on the callback; JSON, as a script asks for it. */
const complete = (flow: Flow) => flow.browser.fetch(flow.callback, { headers: asJson });

interface Connected {
  organization: { id: string; name: string };
  connected: { id: string; tenantId: string; tenantName: string | null }[];
  refused: { tenantId: string; reason: string }[];
  confirmation: { required: boolean; message: string };
}

const errorCode = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;

const connectionsOf = async (key: string) =>
  (
    (await (await server.get('/api/connections', { headers: auth(key) })).json()) as {
      data: { id: string; tenantId: string }[];
    }
  ).data;

async function sql(text: string, values: unknown[] = []) {
  const db = new pg.Client(url);
  await db.connect();
  try {
    return (await db.query(text, values)).rows;
  } finally {
    await db.end();
  }
}

describe('the Xero connect flow', () => {
  it('connects an organization, then pushes the invoices that waited for it', async () => {
    const org = await createOrg(url, 'Connect Co');
    await waitForKey(server, org.apiKey);
    const waiting = await server.get('/api/invoices', {
      method: 'POST',
      headers: {
        ...auth(org.apiKey),
        'content-type': 'application/json',
        'idempotency-key': 'before-connect',
      },
      body: JSON.stringify(invoiceBody()),
    });
    const { id, status } = (await waiting.json()) as { id: string; status: string };
    expect(status).toBe('awaiting_connection');

    const done = await complete(await authorize(org.apiKey));
    expect(done.status).toBe(200);
    const { connected } = (await done.json()) as Connected;
    expect(connected).toHaveLength(1);

    const list = (await (await server.get('/api/connections', { headers: auth(org.apiKey) })).json()) as {
      data: { id: string; status: string }[];
    };
    expect(list.data).toEqual([expect.objectContaining({ id: connected[0]?.id, status: 'active' })]);
    // Tokens are stored encrypted, never in the clear.
    const db = new pg.Client(url);
    await db.connect();
    const stored = await db.query('SELECT access_token_enc, refresh_token_enc FROM xero_grants');
    await db.end();
    expect(JSON.stringify(stored.rows)).not.toMatch(/eyJ/);

    // Connected is not chosen: the invoice still waits, saying why.
    const still = (await (await server.get(`/api/invoices/${id}`, { headers: auth(org.apiKey) })).json()) as {
      status: string;
      lastError: string;
    };
    expect(still).toMatchObject({
      status: 'awaiting_connection',
      lastError: expect.stringMatching(/default/),
    });
    expect((await makeDefault(org.apiKey, connected[0]?.id)).status).toBe(200);

    // Choosing the default queued the waiting invoice and started a push at once (the tick interval is
    // a minute).
    const pushed = await until(
      async () =>
        (await (await server.get(`/api/invoices/${id}`, { headers: auth(org.apiKey) })).json()) as {
          status: string;
        },
      (i) => i.status === 'pushed',
      10_000,
    );
    expect(pushed.status).toBe('pushed');
    expect(sandbox.state.statsSnapshot().invoicesCreated[connected[0]?.tenantId ?? '']).toBe(1);
  });

  it('rejects a replayed state and an expired one', async () => {
    const org = await createOrg(url, 'Replay Co');
    await waitForKey(server, org.apiKey);
    const flow = await authorize(org.apiKey);
    const cookie = flow.browser.cookie('xero_connect')?.value ?? '';
    const done = await complete(flow);
    expect(done.status).toBe(200);
    // The callback ends the browser's binding.
    expect(flow.browser.setCookies.at(-1)).toMatch(/^xero_connect=; Max-Age=0; Path=\/connect\/xero;/);
    expect(flow.browser.cookie('xero_connect')).toBeUndefined();
    const replay = await complete(flow);
    expect(replay.status).toBe(400);
    expect(await errorCode(replay)).toBe('invalid_state');
    // Replayed with the cookie it had: the state is spent all the same.
    const withCookie = await fetch(flow.callback, {
      headers: { ...asJson, cookie: `xero_connect=${cookie}` },
    });
    expect(withCookie.status).toBe(400);
    expect(await errorCode(withCookie)).toBe('invalid_state');

    const second = await authorize(org.apiKey);
    await sql(`UPDATE oauth_states SET expires_at = now() - interval '1 second'`);
    const expired = await complete(second);
    expect(expired.status).toBe(400);
    expect(await errorCode(expired)).toBe('invalid_state');

    const forged = await server.get('/connect/xero/callback?code=abc&state=forged', { headers: asJson });
    expect(forged.status).toBe(400);
    expect(await forged.json()).toEqual({
      error: expect.objectContaining({
        code: 'invalid_state',
        fields: [expect.objectContaining({ path: 'state' })],
      }),
    });
  });

  it('keeps organizations apart: one Xero user connecting two organizations hands each only its own tenants', async () => {
    const a = await createOrg(url, 'Bookkeeper client A');
    const b = await createOrg(url, 'Bookkeeper client B');
    await waitForKey(server, a.apiKey);
    await waitForKey(server, b.apiKey);
    const tenantA = sandbox.state.createTenant({ name: 'A Ltd', accountCodes: null }).id;
    const tenantB = sandbox.state.createTenant({ name: 'B Ltd', accountCodes: null }).id;

    // The same Xero user (the sandbox has one) approves A's tenant for A, then B's for B. Xero's
    // /connections now lists both tenants for that user; B must get only the tenant of its own consent.
    const doneA = (await (
      await complete(await authorize(a.apiKey, { tenantIds: [tenantA] }))
    ).json()) as Connected;
    expect(doneA.connected.map((c) => c.tenantId)).toEqual([tenantA]);
    const doneB = (await (
      await complete(await authorize(b.apiKey, { tenantIds: [tenantB] }))
    ).json()) as Connected;
    expect(doneB.connected.map((c) => c.tenantId)).toEqual([tenantB]);
    // A's tenant was never even offered to B: it is not part of B's consent.
    expect(doneB.refused).toEqual([]);

    const list = async (key: string) =>
      (
        (await (await server.get('/api/connections', { headers: auth(key) })).json()) as {
          data: { id: string; tenantId: string }[];
        }
      ).data;
    expect((await list(a.apiKey)).map((c) => c.tenantId)).toEqual([tenantA]);
    expect((await list(b.apiKey)).map((c) => c.tenantId)).toEqual([tenantB]);

    // Each chooses its own tenant, and pushes only to it.
    expect((await makeDefault(a.apiKey, doneA.connected[0]?.id)).status).toBe(200);
    expect((await makeDefault(b.apiKey, doneB.connected[0]?.id)).status).toBe(200);
    for (const org of [a, b]) {
      const res = await server.get('/api/invoices', {
        method: 'POST',
        headers: {
          ...auth(org.apiKey),
          'content-type': 'application/json',
          'idempotency-key': `own-${org.id}`,
        },
        body: JSON.stringify(invoiceBody()),
      });
      expect(res.status).toBe(202);
    }
    await until(
      async () => sandbox.state.statsSnapshot().invoicesCreated,
      (n) => n[tenantA] === 1 && n[tenantB] === 1,
      10_000,
    );

    // B's user ticks A's tenant too: it is refused (held by A), never moved to B.
    const again = await complete(await authorize(b.apiKey, { tenantIds: [tenantA, tenantB] }));
    expect(again.status).toBe(200);
    const third = (await again.json()) as {
      connected: { tenantId: string }[];
      refused: { tenantId: string; reason: string }[];
    };
    expect(third.connected.map((c) => c.tenantId)).toEqual([tenantB]);
    expect(third.refused).toEqual([
      expect.objectContaining({ tenantId: tenantA, reason: 'held_by_another_organization' }),
    ]);
    expect((await list(a.apiKey)).map((c) => c.tenantId)).toEqual([tenantA]);
    expect((await list(b.apiKey)).map((c) => c.tenantId)).toEqual([tenantB]);

    // Neither can disconnect the other's tenant.
    const aConnection = (await list(a.apiKey))[0]?.id ?? '';
    const bDeletes = await server.get(`/api/connections/${aConnection}`, {
      method: 'DELETE',
      headers: auth(b.apiKey),
    });
    expect(bDeletes.status).toBe(404);
  });

  it('answers 502 (not 500) when Xero fails to list the approved tenants', async () => {
    const org = await createOrg(url, 'Connections Down Co');
    await waitForKey(server, org.apiKey);
    const flow = await authorize(org.apiKey);
    sandbox.state.faults.add({ target: 'connections', kind: '500' });
    const done = await complete(flow);
    expect(done.status).toBe(502);
    expect(((await done.json()) as { error: { code: string } }).error.code).toBe('xero_connections_failed');
  });

  it('says so when the granted scopes cannot create invoices', async () => {
    const org = await createOrg(url, 'Narrow Scope Co');
    await waitForKey(server, org.apiKey);
    const done = await complete(
      await authorize(org.apiKey, { grantScope: 'offline_access accounting.contacts' }),
    );
    expect(done.status).toBe(400);
    const body = (await done.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('xero_scope_missing');
    expect(body.error.message).toMatch(/accounting\.invoices/);
    const list = (await (await server.get('/api/connections', { headers: auth(org.apiKey) })).json()) as {
      data: unknown[];
    };
    expect(list.data).toEqual([]);
  });

  it('disconnects one tenant with DELETE /connections/{id}, never revoking, even when the last one leaves', async () => {
    const org = await createOrg(url, 'Three Tenants Co');
    await waitForKey(server, org.apiKey);
    const tenants = [1, 2, 3].map((i) => sandbox.state.createTenant({ name: `Three ${i}` }).id);
    const done = (await (
      await complete(await authorize(org.apiKey, { tenantIds: tenants }))
    ).json()) as Connected;
    expect(done.connected).toHaveLength(3);
    const grant = sandbox.state.identity.grants().find((g) => g.connections.has(tenants[0] as string));
    expect(grant?.connections.size).toBe(3);

    const before = sandbox.state.statsSnapshot();
    const del = (id: string) =>
      server.get(`/api/connections/${id}`, { method: 'DELETE', headers: auth(org.apiKey) });
    expect((await del(done.connected[0]?.id ?? '')).status).toBe(204);
    await until(
      async () => sandbox.state.statsSnapshot().disconnections,
      (n) => n === before.disconnections + 1,
      5000,
    );
    expect(grant?.connections.has(tenants[0] as string)).toBe(false);
    expect(grant?.connections.size).toBe(2);
    expect(sandbox.state.statsSnapshot().revocations).toBe(before.revocations);

    expect((await del(done.connected[1]?.id ?? '')).status).toBe(204);
    await until(
      async () => sandbox.state.statsSnapshot().disconnections,
      (n) => n === before.disconnections + 2,
      5000,
    );
    expect(sandbox.state.statsSnapshot().revocations).toBe(before.revocations);

    // The last tenant of the grant goes the same way: DELETE /connections/{id}, never a revocation
    // (which would remove every connection of this Xero user to the app). The grant is forgotten here.
    expect((await del(done.connected[2]?.id ?? '')).status).toBe(204);
    await until(
      async () => sandbox.state.statsSnapshot().disconnections,
      (n) => n === before.disconnections + 3,
      5000,
    );
    expect(sandbox.state.statsSnapshot().revocations).toBe(before.revocations);
    expect(grant?.revokedAt).toBeNull();
    expect(grant?.connections.size).toBe(0);
    const db = new pg.Client(url);
    await db.connect();
    const grants = await db.query('SELECT count(*)::int AS n FROM xero_grants WHERE organization_id = $1', [
      org.id,
    ]);
    await db.end();
    expect(grants.rows[0].n).toBe(0);
  });
});

describe('connect links', () => {
  it('are minted behind the API key, open once, set a bound cookie, and replace GET /connect/xero', async () => {
    const org = await createOrg(url, 'Link Co');
    await waitForKey(server, org.apiKey);
    expect((await server.get('/api/connect-links', { method: 'POST' })).status).toBe(401);
    const res = await server.get('/api/connect-links', { method: 'POST', headers: auth(org.apiKey) });
    expect(res.status).toBe(201);
    const minted = (await res.json()) as { url: string; expiresAt: string };
    expect(minted.url).toMatch(
      new RegExp(`^http://127\\.0\\.0\\.1:${server.port}/connect/xero/start\\?link=[A-Za-z0-9_-]{43}$`),
    );
    const ttl = Date.parse(minted.expiresAt) - Date.now();
    expect(ttl).toBeGreaterThan(9 * 60_000);
    expect(ttl).toBeLessThanOrEqual(10 * 60_000);

    // A mail scanner or chat preview fetches the link first: it gets the page, and spends nothing.
    const scanner = new Browser();
    for (let i = 0; i < 2; i++) expect((await scanner.fetch(minted.url)).status).toBe(200);
    expect(scanner.setCookies).toEqual([]);
    const linkHash = sha256Hex(new URL(minted.url).searchParams.get('link') ?? '');
    expect(await sql('SELECT 1 FROM connect_links WHERE link_hash = $1', [linkHash])).toHaveLength(1);

    const browser = new Browser();
    await openLink(browser, minted.url);
    const cookie = browser.setCookies[0] ?? '';
    expect(cookie).toMatch(/^xero_connect=[A-Za-z0-9_-]{43};/);
    expect(cookie).toMatch(/; Path=\/connect\/xero(;|$)/);
    expect(cookie).toMatch(/; HttpOnly(;|$)/);
    expect(cookie).toMatch(/; SameSite=Lax(;|$)/);
    expect(cookie).not.toMatch(/Secure/); // the callback here is plain http
    // The database holds only hashes of the link and the cookie.
    const stored = JSON.stringify(await sql('SELECT * FROM connect_links'));
    const states = JSON.stringify(await sql('SELECT * FROM oauth_states'));
    const token = new URL(minted.url).searchParams.get('link') ?? '';
    const value = browser.cookie('xero_connect')?.value ?? '';
    for (const secret of [token, value]) {
      expect(stored).not.toContain(secret);
      expect(states).not.toContain(secret);
    }

    // Single use: the same link again (in any browser) is refused.
    const again = await spendLink(new Browser(), minted.url, { headers: asJson });
    expect(again.status).toBe(400);
    expect(await again.json()).toEqual({
      error: expect.objectContaining({
        code: 'invalid_link',
        fields: [expect.objectContaining({ path: 'link' })],
      }),
    });
    const missing = await server.get('/connect/xero/start', { headers: asJson });
    expect(missing.status).toBe(400);
    expect(await errorCode(missing)).toBe('invalid_link');
    // A malformed link is refused before the database is asked, on GET and POST alike.
    for (const method of ['GET', 'POST']) {
      const made = await server.get('/connect/xero/start?link=made-up', { method, headers: asJson });
      expect(made.status).toBe(400);
      expect(await errorCode(made)).toBe('invalid_link');
    }
    // An expired link is refused too.
    const stale = await mintLink(org.apiKey);
    await sql(`UPDATE connect_links SET expires_at = now() - interval '1 second'`);
    const expired = await spendLink(new Browser(), stale, { headers: asJson });
    expect(expired.status).toBe(400);
    expect(await errorCode(expired)).toBe('invalid_link');

    // The old unbound entry is gone, for everyone.
    for (const headers of [{}, auth(org.apiKey)]) {
      const old = await server.get('/connect/xero', { headers, redirect: 'manual' });
      expect(old.status).toBe(410);
      const body = (await old.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('connect_link_required');
      expect(body.error.message).toMatch(/POST \/api\/connect-links/);
    }
  });

  it('stranger with a link, from another browser: the callback is refused and nothing connects', async () => {
    const a = await createOrg(url, 'Stranger Target A');
    const b = await createOrg(url, 'Stranger Own B');
    await waitForKey(server, a.apiKey);
    await waitForKey(server, b.apiKey);
    const before = sandbox.state.statsSnapshot();
    // A's person opens A's link; the consent page (state and all) reaches a stranger, who consents with
    // their own Xero organisation and lands on the callback in their own browser.
    const toXero = await openLink(new Browser(), await mintLink(a.apiKey));
    const strangersTenant = sandbox.state.createTenant({ name: 'Stranger Books' }).id;
    const callback = await consent(toXero, { tenantIds: [strangersTenant] });

    const noCookie = await new Browser().fetch(callback, { headers: asJson });
    expect(noCookie.status).toBe(400);
    expect(await noCookie.json()).toEqual({
      error: expect.objectContaining({
        code: 'invalid_browser',
        fields: [{ path: 'cookie', message: 'xero_connect is missing' }],
      }),
    });
    // A stranger with a cookie of their own (a flow they started for B) fares no better.
    const stranger = new Browser();
    await openLink(stranger, await mintLink(b.apiKey));
    const otherCookie = await stranger.fetch(callback, { headers: asJson });
    expect(otherCookie.status).toBe(400);
    expect(await otherCookie.json()).toEqual({
      error: expect.objectContaining({
        code: 'invalid_browser',
        fields: [{ path: 'cookie', message: 'xero_connect belongs to another flow' }],
      }),
    });
    // In a browser, the refusal is a page that says so.
    const page = await new Browser().fetch(callback, { headers: { accept: 'text/html' } });
    expect(page.status).toBe(400);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await page.text()).toMatch(/did not open the connect link/);

    // The code was never redeemed, and neither organization holds the stranger's books.
    expect(sandbox.state.statsSnapshot().authCodeGrants).toBe(before.authCodeGrants);
    expect(await connectionsOf(a.apiKey)).toEqual([]);
    expect(await connectionsOf(b.apiKey)).toEqual([]);
  });

  it('stranger with a link, in their own browser: the page names the organization and says it must confirm; the link is spent', async () => {
    const a = await createOrg(url, 'Acme & <Sons> "Ltd"');
    await waitForKey(server, a.apiKey);
    const link = await mintLink(a.apiKey);
    // The stranger opens A's unused link first, and consents with their own organisation.
    const stranger = new Browser();
    const strangersTenant = sandbox.state.createTenant({ name: 'Stranger <b>Books</b>' }).id;
    const callback = await consent(await openLink(stranger, link), { tenantIds: [strangersTenant] });
    const done = await stranger.fetch(callback);
    expect(done.status).toBe(200);
    expect(done.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await done.text();
    // Named, escaped: the stranger sees whose organization they just connected, and that it must confirm.
    expect(html).toContain('Acme &amp; &lt;Sons&gt; &quot;Ltd&quot;');
    expect(html).toContain('Stranger &lt;b&gt;Books&lt;/b&gt;');
    expect(html).not.toContain('<b>Books</b>');
    expect(html).toMatch(/Confirmation required/);
    expect(html).toContain('POST /api/connections/{id}/default');
    expect(html).toContain('POST /api/connections/{id}/choose');

    // A's own person opening the link later is refused: it was single use.
    const late = await spendLink(new Browser(), link, { headers: asJson });
    expect(late.status).toBe(400);
    expect(await errorCode(late)).toBe('invalid_link');

    // A's invoice, submitted while the stranger's tenant is A's only connection, goes nowhere.
    const submitted = await server.get('/api/invoices', {
      method: 'POST',
      headers: { ...auth(a.apiKey), 'content-type': 'application/json', 'idempotency-key': 'after-stranger' },
      body: JSON.stringify(invoiceBody()),
    });
    const invoice = (await submitted.json()) as { id: string; status: string };
    expect(invoice.status).toBe('awaiting_connection');

    // The JSON answer says the same.
    const flow = await authorize(a.apiKey);
    const json = (await (await complete(flow)).json()) as Connected;
    expect(json.organization).toEqual({ id: a.id, name: 'Acme & <Sons> "Ltd"' });
    expect(json.confirmation.required).toBe(true);
    expect(json.confirmation.message).toMatch(/\/api\/connections\/\{id\}\/default/);
    expect(json.confirmation.message).toMatch(/\/api\/connections\/\{id\}\/choose/);

    // A chooses the tenant it recognises: the invoice lands there, and the stranger's books get nothing.
    const own = json.connected[0];
    expect((await makeDefault(a.apiKey, own?.id)).status).toBe(200);
    const pushed = await until(
      async () =>
        (await (await server.get(`/api/invoices/${invoice.id}`, { headers: auth(a.apiKey) })).json()) as {
          status: string;
        },
      (i) => i.status === 'pushed',
      10_000,
    );
    expect(pushed.status).toBe('pushed');
    const created = sandbox.state.statsSnapshot().invoicesCreated;
    expect(created[own?.tenantId ?? '']).toBe(1);
    expect(created[strangersTenant] ?? 0).toBe(0);
  });

  it("code injection: a victim's unused code, pasted into another organization's fresh state and cookie, is refused", async () => {
    const victim = await createOrg(url, 'Injection Victim');
    const b = await createOrg(url, 'Injection Attacker B');
    await waitForKey(server, victim.apiKey);
    await waitForKey(server, b.apiKey);
    // The victim's flow: their consent produced a code for the victim's state and PKCE challenge.
    const victimsTenant = sandbox.state.createTenant({ name: 'Victim Books' }).id;
    const victimFlow = await authorize(victim.apiKey, { tenantIds: [victimsTenant] });
    const victimsCode = victimFlow.callback.searchParams.get('code') ?? '';
    expect(victimsCode).not.toBe('');

    // The attacker starts a genuine flow for B, in their own browser, and swaps in the victim's code.
    const attacker = new Browser();
    const attackersCallback = await consent(await openLink(attacker, await mintLink(b.apiKey)));
    const injected = new URL(attackersCallback);
    injected.searchParams.set('code', victimsCode);
    const before = sandbox.state.statsSnapshot();
    const res = await attacker.fetch(injected, { headers: asJson });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: expect.objectContaining({
        code: 'invalid_code',
        fields: [expect.objectContaining({ path: 'code' })],
      }),
    });
    // Xero refused the exchange (the verifier is B's, the code was issued for the victim's challenge).
    expect(sandbox.state.statsSnapshot().invalidGrants).toBe(before.invalidGrants + 1);
    expect(sandbox.state.statsSnapshot().authCodeGrants).toBe(before.authCodeGrants);
    expect(await connectionsOf(b.apiKey)).toEqual([]);
    // B's state was spent by the attempt: the attacker's own code cannot be tried on it afterwards.
    const retry = await attacker.fetch(attackersCallback, { headers: asJson });
    expect(retry.status).toBe(400);
    expect(await errorCode(retry)).toBe('invalid_state');
  });
});
