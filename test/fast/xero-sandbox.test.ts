// The Xero sandbox in process: the same app without a socket (what the fast layer's Xero calls use).
// The rest of the sandbox is tested over real HTTP in test/xero-sandbox.test.ts.
import { describe, expect, it } from 'vitest';
import { createXeroSandbox } from '../../tools/xero-sandbox/app.js';
import { inProcessFetch } from '../../tools/xero-sandbox/in-process.js';
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
