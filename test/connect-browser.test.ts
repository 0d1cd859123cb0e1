// The connect flow's pages in a real browser (Debian's chromium): the confirm page a link shows, the
// click that spends it, Xero's consent page (the sandbox's), and the callback page; with the cookie as
// the browser stores it, a stranger's browser, and a replayed link.
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { CHROMIUM_HINT, type Chromium, hasChromium, launchChromium } from './support/chromium.js';
import { freshDatabase } from './support/databases.js';
import { createOrg, waitForKey } from './support/orgs.js';
import { freePort } from './support/ports.js';
import { type Cluster, startCluster } from './support/postgres.js';
import { type ServerProcess, spawnServer } from './support/server.js';
import { type Sandbox, sandboxEnv } from './support/ticks.js';

describe.skipIf(!hasChromium)(`the connect pages in Chromium (${CHROMIUM_HINT})`, () => {
  let cluster: Cluster;
  let sandbox: Sandbox;
  let server: ServerProcess;
  let browser: Chromium;
  let url: string;
  let callbackUrl: string;

  beforeAll(async () => {
    [cluster, sandbox, browser] = await Promise.all([
      startCluster(),
      // Xero's consent page, with its "Allow access" button, as a person sees it.
      startXeroSandbox({ port: 0, consentPage: true }),
      launchChromium(),
    ]);
    url = await freshDatabase(cluster);
    const port = await freePort();
    callbackUrl = `http://127.0.0.1:${port}/connect/xero/callback`;
    server = await spawnServer({
      port,
      env: {
        DATABASE_URL: url,
        API_KEY_REFRESH_MS: '100',
        TICK_INTERVAL_MS: '60000',
        ...sandboxEnv(sandbox),
        XERO_REDIRECT_URI: callbackUrl,
      },
    });
    await server.waitForReady();
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await sandbox?.close();
    await cluster?.remove();
  });

  // Each test starts from a clean browser and no queued consent, whatever the one before left.
  beforeEach(async () => {
    await browser.person.clearCookies();
    sandbox.state.authorizePlans.length = 0;
  });

  const auth = (key: string) => ({ authorization: `Bearer ${key}` });

  async function organizationWithLink(name: string) {
    const org = await createOrg(url, name);
    await waitForKey(server, org.apiKey);
    const res = await server.get('/api/connect-links', { method: 'POST', headers: auth(org.apiKey) });
    expect(res.status).toBe(201);
    return { ...org, link: ((await res.json()) as { url: string }).url };
  }

  const connectionsOf = async (key: string) =>
    (
      (await (await server.get('/api/connections', { headers: auth(key) })).json()) as {
        data: { id: string; tenantId: string; status: string }[];
      }
    ).data;

  const flowCookie = async (context: BrowserContext) =>
    (await context.cookies()).find((c) => c.name === 'xero_connect');

  /** Opens the link: the confirm page, whose GET spends nothing. */
  async function openConfirmPage(page: Page, link: string): Promise<void> {
    const res = await page.goto(link);
    expect(res?.status()).toBe(200);
    await expect.poll(() => page.title()).toBe('Connect Xero');
    expect(await page.getByRole('button', { name: 'Continue to Xero' }).count()).toBe(1);
  }

  /** Clicks a button that navigates; answers the navigation's response. */
  async function clickThrough(page: Page, button: string, to: string) {
    const [res] = await Promise.all([
      page.waitForResponse((r) => r.url().startsWith(to) && r.request().isNavigationRequest()),
      page.getByRole('button', { name: button }).click(),
    ]);
    await page.waitForLoadState();
    return res;
  }

  it('a person opens the link, reloads it, clicks through the consent page and lands connected; the link then refuses a replay', async () => {
    const org = await organizationWithLink('Browser & <Co>');
    const tenant = sandbox.state.createTenant({ name: 'Browser Books' }).id;
    const page = await browser.person.newPage();

    await openConfirmPage(page, org.link);
    // Prefetch, reload, a second look: GET spends nothing and sets no cookie.
    const reloaded = await page.reload();
    expect(reloaded?.status()).toBe(200);
    expect(await page.title()).toBe('Connect Xero');
    expect(await flowCookie(browser.person)).toBeUndefined();
    // Someone else's browser opening the same link sees the same page; the link stays the person's.
    const stranger = await browser.stranger();
    try {
      await openConfirmPage(await stranger.newPage(), org.link);
      expect(await stranger.cookies()).toEqual([]);
    } finally {
      await stranger.close();
    }

    // The click spends the link: POST, 303 to Xero's authorize URL, where the consent page shows.
    const authorizeUrl = `${sandbox.url}/identity/connect/authorize`;
    const consent = await clickThrough(page, 'Continue to Xero', authorizeUrl);
    expect(consent.status()).toBe(200);
    const posted = await consent.request().redirectedFrom()?.response();
    expect(posted?.status()).toBe(303);
    expect(consent.request().redirectedFrom()?.method()).toBe('POST');
    expect(new URL(page.url()).searchParams.get('code_challenge_method')).toBe('S256');
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toMatch(/wants to access/);
    // The person picks the organisation to connect, as on Xero's page.
    await page.getByRole('radio', { name: 'Browser Books' }).check();

    // The binding cookie, as the browser keeps it: beside the callback only, not for scripts, sent on
    // Xero's top-level redirect back (Lax), not Secure (this callback is plain http), ten minutes.
    const cookie = await flowCookie(browser.person);
    expect(cookie).toMatchObject({
      domain: '127.0.0.1',
      path: '/connect/xero',
      httpOnly: true,
      secure: false,
      sameSite: 'Lax',
    });
    expect(cookie?.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const ttl = (cookie?.expires ?? 0) * 1000 - Date.now();
    expect(ttl).toBeGreaterThan(9 * 60_000);
    expect(ttl).toBeLessThanOrEqual(10 * 60_000 + 1000);
    // Not readable from the page's scripts (HttpOnly), on our origin as on Xero's.
    expect(await page.evaluate(() => document.cookie)).not.toContain('xero_connect');

    // "Allow access": Xero redirects to the callback, which shows the connected page.
    const done = await clickThrough(page, 'Allow access', callbackUrl);
    expect(done.status()).toBe(200);
    expect(await page.title()).toBe('Xero connected');
    const text = (await page.locator('main').textContent()) ?? '';
    expect(text).toContain('Xero is connected for the organization Browser & <Co>');
    expect(text).toContain('Browser Books');
    expect(text).toMatch(/Confirmation required/);
    // The callback ended the binding.
    expect(await flowCookie(browser.person)).toBeUndefined();
    expect(await connectionsOf(org.apiKey)).toEqual([
      expect.objectContaining({ tenantId: tenant, status: 'active' }),
    ]);

    // The same link again, in the same browser: the page shows, the click is refused with a page.
    await openConfirmPage(page, org.link);
    const replay = await clickThrough(page, 'Continue to Xero', org.link);
    expect(replay.status()).toBe(400);
    expect(await page.title()).toBe('Xero was not connected');
    expect(await page.locator('main').textContent()).toMatch(/unknown, used or expired.*invalid_link/s);
    expect(await connectionsOf(org.apiKey)).toHaveLength(1);
    await page.close();
  });

  it("a stranger's browser landing on the callback is refused with a page, and the person's flow still ends connected", async () => {
    const org = await organizationWithLink('Stranger Target');
    sandbox.state.createTenant({ name: 'Stranger Books' });
    const own = sandbox.state.createTenant({ name: 'Own Books' }).id;
    const page = await browser.person.newPage();
    await openConfirmPage(page, org.link);
    await clickThrough(page, 'Continue to Xero', `${sandbox.url}/identity/connect/authorize`);
    const consentUrl = page.url();

    // The consent page's address (state and all) reaches a stranger, who approves their own books in
    // their own browser and lands on our callback without the person's cookie.
    const stranger = await browser.stranger();
    try {
      const strangersPage = await stranger.newPage();
      await strangersPage.goto(consentUrl);
      await strangersPage.getByRole('radio', { name: 'Stranger Books' }).check();
      const refused = await clickThrough(strangersPage, 'Allow access', callbackUrl);
      expect(refused.status()).toBe(400);
      expect(await strangersPage.title()).toBe('Xero was not connected');
      const text = (await strangersPage.locator('main').textContent()) ?? '';
      expect(text).toMatch(/this browser did not open the connect link/);
      expect(text).toMatch(/invalid_browser/);
      expect(await stranger.cookies()).toEqual([]);
    } finally {
      await stranger.close();
    }
    expect(await connectionsOf(org.apiKey)).toEqual([]);

    // The refusal spent nothing of the person's: their own "Allow access" still connects their books.
    await page.getByRole('radio', { name: 'Own Books' }).check();
    const done = await clickThrough(page, 'Allow access', callbackUrl);
    expect(done.status()).toBe(200);
    expect(await page.title()).toBe('Xero connected');
    expect((await connectionsOf(org.apiKey)).map((c) => c.tenantId)).toEqual([own]);
    await page.close();
  });
});
