// Development mode connects any organization, as a person does it in a browser (docs/development.md,
// "Connecting another organization"): a second organization made with `npm run org:create`, its
// connect link opened, the confirm page's button, the redirect to the sandbox's consent page at its
// real loopback address, "Allow access" for a new sandbox organisation, back to the callback, and an
// invoice of that organization pushed to the tenant it connected.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { Browser } from './support/browser.js';
import { invoiceBody } from './support/orgs.js';
import { seedPgliteDir } from './support/pglite-template.js';
import { repoRoot, spawnStart, tsx, tsxArgs } from './support/server.js';

const dir = mkdtempSync(join(tmpdir(), 'development-connect-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const auth = (key: string) => ({ authorization: `Bearer ${key}` });

/** The hidden and named fields of the consent page's form, as a browser would submit them. */
function consentForm(html: string, choice: { tenant: string; decision: string }): URLSearchParams {
  const form = new URLSearchParams();
  for (const [, name, value] of html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)) {
    form.append(
      name as string,
      (value as string).replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n))),
    );
  }
  form.append('tenant', choice.tenant);
  form.append('tenant_name', 'Second books');
  form.append('decision', choice.decision);
  return form;
}

describe('development mode, a second organization', () => {
  it('its connect link leads a browser to the sandbox consent page and back; its invoice is pushed', async () => {
    // `npm run org:create` on the embedded database, the server stopped (one process opens PGlite). An
    // initdb'd one: a first start on nothing is first-run.test.ts's.
    await seedPgliteDir(join(dir, '.data/pglite'));
    const { stdout } = await promisify(execFile)(
      tsx,
      tsxArgs(resolve(repoRoot, 'cli/org.ts'), 'create', '--name', 'Second Co'),
      { cwd: dir, env: { PATH: process.env.PATH }, timeout: 120_000 },
    );
    const second = JSON.parse(stdout) as { id: string; apiKey: string };

    const server = await spawnStart({ cwd: dir, env: { TOKEN_ENCRYPTION_KEY: undefined }, scanned: false });
    try {
      await server.waitForReady(180_000);
      const link = await server.get('/api/connect-links', { method: 'POST', headers: auth(second.apiKey) });
      expect(link.status).toBe(201);
      const { url } = (await link.json()) as { url: string };

      const browser = new Browser();
      expect((await browser.fetch(url)).status).toBe(200);
      const start = await browser.fetch(url, { method: 'POST' });
      expect(start.status).toBe(303);
      // The sandbox's own address, which the server reaches it at: a browser can open it.
      const toXero = new URL(start.headers.get('location') ?? '');
      expect(toXero.origin).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(toXero.pathname).toBe('/identity/connect/authorize');
      const page = await browser.fetch(toXero);
      expect(page.status).toBe(200);
      const html = await page.text();
      expect(html).toContain('Allow access');

      const allowed = await browser.fetch(new URL('/identity/connect/authorize', toXero), {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: consentForm(html, { tenant: 'new', decision: 'allow' }),
      });
      expect(allowed.status).toBe(302);
      const callback = new URL(allowed.headers.get('location') ?? '');
      expect(callback.pathname).toBe('/connect/xero/callback');
      expect(callback.searchParams.get('code')).toBeTruthy();

      const landed = await browser.fetch(callback, { headers: { accept: 'application/json' } });
      expect(landed.status).toBe(200);
      const connected = (await landed.json()) as {
        organization: { id: string };
        connected: { id: string; tenantName: string | null }[];
        refused: unknown[];
      };
      expect(connected.organization.id).toBe(second.id);
      expect(connected.refused).toEqual([]);
      expect(connected.connected.map((c) => c.tenantName)).toEqual(['Second books']);

      const chosen = await server.get(`/api/connections/${connected.connected[0]?.id}/default`, {
        method: 'POST',
        headers: auth(second.apiKey),
      });
      expect(chosen.status).toBe(200);
      const created = await server.get('/api/invoices', {
        method: 'POST',
        headers: {
          ...auth(second.apiKey),
          'content-type': 'application/json',
          'idempotency-key': 'second-1',
        },
        body: JSON.stringify(invoiceBody()),
      });
      expect(created.status).toBe(202);
      const { id } = (await created.json()) as { id: string };
      const deadline = Date.now() + 60_000;
      for (;;) {
        const push = (await (
          await server.get(`/api/invoices/${id}`, { headers: auth(second.apiKey) })
        ).json()) as {
          status: string;
        };
        if (push.status === 'pushed') break;
        if (Date.now() > deadline) {
          const said = server.logs.filter((l) => l.level !== 'info' || /push|xero/i.test(l.msg));
          throw new Error(`not pushed in time: ${JSON.stringify(push)}\n${JSON.stringify(said, null, 1)}`);
        }
        await new Promise((done) => setTimeout(done, 100));
      }
    } finally {
      expect(await server.stop()).toBe(0);
    }
  }, 400_000);
});
