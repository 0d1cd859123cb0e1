// Contract tests: Xero's official SDK, xero-node, drives the sandbox, which shows the sandbox speaks
// what Xero's own client speaks. The accounting API goes through the SDK's configurable basePath. The
// identity calls (code exchange, refresh, /connections, disconnect, revocation) have Xero's hosts
// hard-coded: openid-client gets an Issuer whose endpoints are the sandbox's, and the SDK's own axios
// calls are routed to the sandbox by an interceptor on the axios instance the SDK itself loads.
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Invoices as SdkInvoices, XeroClient } from 'xero-node';
import { type RunningXeroSandbox, startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { toXeroInvoice } from '../src/app/invoices/xero-payload.js';
import { authEventIdOf } from '../src/app/xero/client.js';
import { asSdkInvoice, stored } from './support/sdk-invoice.js';

// openid-client and axios as xero-node resolves them (not dependencies of this project).
const sdkRequire = createRequire(createRequire(import.meta.url).resolve('xero-node'));
const { Issuer } = sdkRequire('openid-client') as typeof import('openid-client');
const axios = sdkRequire('axios') as {
  interceptors: {
    request: { use(fn: (config: { url?: string }) => { url?: string }): number; eject(id: number): void };
  };
  (config: Record<string, unknown>): Promise<{ status: number; data: unknown }>;
};

const REDIRECT_URI = 'http://127.0.0.1:9/callback';
let sandbox: RunningXeroSandbox;
let interceptor: number;

beforeAll(async () => {
  sandbox = await startXeroSandbox({ port: 0 });
  interceptor = axios.interceptors.request.use((config) => {
    if (config.url?.startsWith('https://identity.xero.com/'))
      config.url = config.url.replace('https://identity.xero.com', sandbox.urls.identityBaseUrl);
    else if (config.url?.startsWith('https://api.xero.com/'))
      config.url = config.url.replace('https://api.xero.com', sandbox.url);
    return config;
  });
});
afterAll(async () => {
  axios.interceptors.request.eject(interceptor);
  await sandbox?.close();
});

/** An SDK client whose openid-client talks to the sandbox's identity endpoints. */
function sdkClient(state = 'contract-state'): XeroClient {
  const xero = new XeroClient({
    clientId: sandbox.state.client.clientId,
    clientSecret: sandbox.state.client.clientSecret,
    redirectUris: [REDIRECT_URI],
    // Without openid the SDK uses oauthCallback (no id_token to verify: the sandbox does not sign).
    scopes: ['offline_access', 'accounting.invoices'],
    state,
  });
  const issuer = new Issuer({
    issuer: 'https://identity.xero.com',
    authorization_endpoint: sandbox.urls.authorizeUrl,
    token_endpoint: sandbox.urls.tokenUrl,
    revocation_endpoint: sandbox.urls.revocationUrl,
  });
  xero.openIdClient = new issuer.Client({
    client_id: sandbox.state.client.clientId,
    client_secret: sandbox.state.client.clientSecret,
    redirect_uris: [REDIRECT_URI],
  });
  xero.accountingApi.basePath = sandbox.urls.apiBaseUrl;
  return xero;
}

describe('xero-node against the sandbox', () => {
  it('code exchange, /connections (with authEventId), refresh, createInvoices with an idempotency key, disconnect, revoke', async () => {
    const tenants = [1, 2].map(
      (i) => sandbox.state.createTenant({ name: `Contract ${i}`, accountCodes: null }).id,
    );
    // The same user connected another tenant to the app earlier, in another consent.
    const earlier = sandbox.state.createTenant({ name: 'Earlier consent', accountCodes: null }).id;
    sandbox.state.createGrant({ tenantIds: [earlier] });
    sandbox.state.authorizePlans.push({ deny: false, tenantIds: tenants, grantScope: null });

    const xero = sdkClient();
    const consent = new URL(await xero.buildConsentUrl());
    expect(consent.searchParams.get('scope')).toBe('offline_access accounting.invoices');
    const approved = await fetch(consent, { redirect: 'manual' });
    expect(approved.status).toBe(302);
    const tokenSet = await xero.apiCallback(approved.headers.get('location') as string);
    expect(tokenSet.refresh_token).toEqual(expect.any(String));
    expect(tokenSet.expires_in).toBe(1800);

    // Unfiltered, /connections has every tenant of the user; filtered by the consent's auth event, only
    // the two just approved. (The SDK's updateTenants sends the unfiltered request; the filtered one is
    // the same request the SDK builds, with the query xero-identity.yaml defines.)
    const all = await xero.updateTenants(false);
    expect(all.map((t: { tenantId: string }) => t.tenantId).sort()).toEqual([...tenants, earlier].sort());
    const authEventId = authEventIdOf(tokenSet.access_token as string);
    const filtered = await axios({
      method: 'GET',
      url: `https://api.xero.com/connections?authEventId=${authEventId}`,
      headers: { Authorization: `Bearer ${tokenSet.access_token}` },
      responseType: 'json',
    });
    const mine = filtered.data as { id: string; tenantId: string; authEventId: string }[];
    expect(mine.map((t) => t.tenantId).sort()).toEqual([...tenants].sort());
    expect(mine.every((t) => t.authEventId === authEventId)).toBe(true);

    // Refresh, both ways the SDK offers: openid-client's, and its own axios call.
    const before = sandbox.state.statsSnapshot().refreshGrants;
    const rotated = await xero.refreshToken();
    expect(rotated.refresh_token).not.toBe(tokenSet.refresh_token);
    const again = await xero.refreshWithRefreshToken(
      sandbox.state.client.clientId,
      sandbox.state.client.clientSecret,
      rotated.refresh_token,
    );
    expect(again.access_token).toEqual(expect.any(String));
    expect(sandbox.state.statsSnapshot().refreshGrants).toBe(before + 2);

    // createInvoices through basePath, twice under one idempotency key: Xero holds one invoice.
    const invoices: SdkInvoices = { invoices: [asSdkInvoice(toXeroInvoice(stored))] };
    const key = crypto.randomUUID();
    const first = await xero.accountingApi.createInvoices(tenants[0] as string, invoices, undefined, 4, key);
    const replay = await xero.accountingApi.createInvoices(tenants[0] as string, invoices, undefined, 4, key);
    const created = first.body.invoices?.[0];
    expect(created?.invoiceID).toEqual(expect.any(String));
    expect(replay.body.invoices?.[0]?.invoiceID).toBe(created?.invoiceID);
    expect(created?.lineItems?.[0]).toMatchObject({ quantity: 2.5, unitAmount: 0.1234 });
    expect(sandbox.state.statsSnapshot().invoicesCreated[tenants[0] as string]).toBe(1);

    // Disconnect one tenant (DELETE /connections/{id}): the other stays, the grant too.
    const revocations = sandbox.state.statsSnapshot().revocations;
    await xero.disconnect(mine.find((t) => t.tenantId === tenants[0])?.id as string);
    const left = await xero.updateTenants(false);
    expect(left.map((t: { tenantId: string }) => t.tenantId).sort()).toEqual([tenants[1], earlier].sort());
    expect(sandbox.state.statsSnapshot().revocations).toBe(revocations);
    const stillWorks = await xero.accountingApi.createInvoices(tenants[1] as string, invoices, undefined, 4);
    expect(stillWorks.response.status).toBe(200);

    // Revoking the refresh token "Revokes a users refresh token and removes all their connections to
    // your app" (xero-node README, revokeToken): the earlier consent's tenant goes too.
    await xero.revokeToken();
    expect(sandbox.state.statsSnapshot().revocations).toBe(revocations + 1);
    const after = sdkClient();
    after.setTokenSet(again);
    const remaining = await after.updateTenants(false);
    expect(remaining).toEqual([]);
    expect(sandbox.state.identity.userConnections(sandbox.state.client.clientId)).toEqual([]);
  });

  it('rounds UnitAmount to two places without unitdp, as Xero does', async () => {
    const tenantId = sandbox.state.createTenant({ name: 'Rounding', accountCodes: null }).id;
    sandbox.state.authorizePlans.push({ deny: false, tenantIds: [tenantId], grantScope: null });
    const xero = sdkClient('rounding');
    const approved = await fetch(await xero.buildConsentUrl(), { redirect: 'manual' });
    await xero.apiCallback(approved.headers.get('location') as string);
    const invoices: SdkInvoices = { invoices: [asSdkInvoice(toXeroInvoice(stored))] };
    const twoPlaces = await xero.accountingApi.createInvoices(tenantId, invoices);
    expect(twoPlaces.body.invoices?.[0]?.lineItems?.[0]?.unitAmount).toBe(0.12);
  });
});
