// The Xero sandbox over real HTTP: OAuth (auth code, refresh rotation and grace, client auth), tenants,
// invoices with Idempotency-Key, rate limits, every fault kind, the control API and its stats.
// (Its in-process use is tested in test/fast/xero-sandbox.test.ts.)
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type RunningXeroSandbox, startXeroSandbox } from '../dev/xero-sandbox/server.js';
import type { SandboxStats } from '../dev/xero-sandbox/stats.js';
import { sandboxInvoice } from './support/sandbox-invoice.js';

const CLIENT_ID = 'sandbox-client';
const CLIENT_SECRET = 'sandbox-secret';
const REDIRECT_URI = 'http://127.0.0.1:9/callback';
const SCOPE = 'openid profile email accounting.transactions accounting.settings offline_access';
const MINUTE = 60_000;

let sandbox: RunningXeroSandbox;

beforeAll(async () => {
  sandbox = await startXeroSandbox({ port: 0 });
});

afterAll(async () => {
  await sandbox?.close();
});

beforeEach(() => {
  sandbox.state.reset();
});

type Json = Record<string, unknown>;

function basic(id = CLIENT_ID, secret = CLIENT_SECRET): string {
  return `Basic ${btoa(`${id}:${secret}`)}`;
}

async function control<T = Json>(path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(`${sandbox.urls.controlUrl}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as T };
}

async function authorize(params: Record<string, string> = {}): Promise<URL> {
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: CLIENT_ID,
    redirect_uri: REDIRECT_URI,
    scope: SCOPE,
    state: 'st-123',
    ...params,
  });
  const res = await fetch(`${sandbox.urls.authorizeUrl}?${query}`, { redirect: 'manual' });
  expect(res.status).toBe(302);
  return new URL(res.headers.get('location') as string);
}

function tokenRequest(
  form: Record<string, string>,
  authorization: string | null = basic(),
): Promise<Response> {
  return fetch(sandbox.urls.tokenUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...(authorization ? { authorization } : {}),
    },
    body: new URLSearchParams(form),
  });
}

interface Tokens {
  access_token: string;
  refresh_token: string;
  expires_in: number;
  token_type: string;
  scope: string;
  id_token?: string;
}

async function login(scope = SCOPE): Promise<Tokens & { tenantId: string }> {
  const redirect = await authorize({ scope });
  const res = await tokenRequest({
    grant_type: 'authorization_code',
    code: redirect.searchParams.get('code') as string,
    redirect_uri: REDIRECT_URI,
  });
  expect(res.status).toBe(200);
  const tokens = (await res.json()) as Tokens;
  const connections = (await (
    await api('GET', sandbox.urls.connectionsUrl, tokens.access_token)
  ).json()) as Json[];
  return { ...tokens, tenantId: connections[0]?.tenantId as string };
}

function refresh(refreshToken: string): Promise<Response> {
  return tokenRequest({ grant_type: 'refresh_token', refresh_token: refreshToken });
}

function api(
  method: string,
  url: string,
  accessToken: string,
  options: { tenantId?: string; body?: unknown; headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<Response> {
  return fetch(url, {
    method,
    headers: {
      authorization: `Bearer ${accessToken}`,
      accept: 'application/json',
      ...(options.tenantId ? { 'xero-tenant-id': options.tenantId } : {}),
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...options.headers,
    },
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    signal: options.signal,
  });
}

function putInvoices(
  session: { access_token: string; tenantId: string },
  invoices: Json[],
  headers: Record<string, string> = {},
  query = '',
): Promise<Response> {
  return api('PUT', `${sandbox.urls.apiBaseUrl}/Invoices${query}`, session.access_token, {
    tenantId: session.tenantId,
    body: { Invoices: invoices },
    headers,
  });
}

async function stats(): Promise<SandboxStats> {
  return (await control<SandboxStats>('/stats')).body;
}

describe('OAuth2 authorization code flow', () => {
  it('redirects with a code, exchanges it for tokens and lists the connected tenant', async () => {
    const redirect = await authorize();
    expect(`${redirect.origin}${redirect.pathname}`).toBe(REDIRECT_URI);
    expect(redirect.searchParams.get('state')).toBe('st-123');
    const code = redirect.searchParams.get('code') as string;
    expect(code).toMatch(/^[\w-]{20,}$/);

    const res = await tokenRequest({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const tokens = (await res.json()) as Tokens;
    expect(tokens).toMatchObject({ expires_in: 1800, token_type: 'Bearer', scope: SCOPE });
    expect(tokens.access_token.split('.')).toHaveLength(3);
    expect(typeof tokens.refresh_token).toBe('string');
    expect(typeof tokens.id_token).toBe('string');
    const claims = JSON.parse(
      Buffer.from(tokens.access_token.split('.')[1] as string, 'base64url').toString(),
    );
    expect(claims.exp - claims.nbf).toBe(1800);

    const connectionsRes = await api('GET', sandbox.urls.connectionsUrl, tokens.access_token);
    expect(connectionsRes.status).toBe(200);
    const connections = (await connectionsRes.json()) as Json[];
    expect(connections).toHaveLength(1);
    expect(connections[0]).toEqual({
      id: expect.any(String),
      authEventId: claims.authentication_event_id,
      tenantId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      tenantType: 'ORGANISATION',
      tenantName: 'Demo Company (Sandbox)',
      createdDateUtc: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}$/),
      updatedDateUtc: expect.any(String),
    });

    // Codes are single-use.
    const again = await tokenRequest({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI });
    expect(again.status).toBe(400);
    expect(await again.json()).toEqual({ error: 'invalid_grant' });
    expect(await stats()).toMatchObject({ authorizations: 1, authCodeGrants: 1, invalidGrants: 1 });
  });

  it('binds codes to redirect_uri and expires them after five minutes', async () => {
    const first = (await authorize()).searchParams.get('code') as string;
    const wrong = await tokenRequest({
      grant_type: 'authorization_code',
      code: first,
      redirect_uri: 'http://evil/cb',
    });
    expect(wrong.status).toBe(400);
    expect(await wrong.json()).toEqual({ error: 'invalid_grant' });

    const second = (await authorize()).searchParams.get('code') as string;
    await control('/clock', { advanceMs: 5 * MINUTE + 1 });
    const late = await tokenRequest({
      grant_type: 'authorization_code',
      code: second,
      redirect_uri: REDIRECT_URI,
    });
    expect(late.status).toBe(400);
    expect(await late.json()).toEqual({ error: 'invalid_grant' });
  });

  it('rejects unknown clients at authorize, and bad or missing client credentials at the token endpoint', async () => {
    const unknown = await fetch(
      `${sandbox.urls.authorizeUrl}?response_type=code&client_id=nope&redirect_uri=${encodeURIComponent(REDIRECT_URI)}&scope=openid`,
      { redirect: 'manual' },
    );
    expect(unknown.status).toBe(400);

    const code = (await authorize()).searchParams.get('code') as string;
    const form = { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI };
    for (const authorization of [basic(CLIENT_ID, 'wrong'), basic('other', CLIENT_SECRET), null]) {
      const res = await tokenRequest(form, authorization);
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: 'invalid_client' });
    }
    // The code survived the failed attempts (client authentication comes first).
    expect((await tokenRequest(form)).status).toBe(200);
    expect((await stats()).invalidClients).toBe(3);
  });

  it('denies when the control API says the user cancels, and omits refresh tokens without offline_access', async () => {
    await control('/authorize', { deny: true });
    const denied = await authorize();
    expect(denied.searchParams.get('error')).toBe('access_denied');
    expect(denied.searchParams.get('state')).toBe('st-123');

    const tokens = await login('openid accounting.transactions');
    expect(tokens.refresh_token).toBeUndefined();
    expect(tokens.access_token).toBeTruthy();
  });
});

describe('refresh tokens', () => {
  it('rotate on every use; the previous one is good for 30 minutes (each reuse a fresh pair: a forked chain), then invalid_grant', async () => {
    const session = await login();
    const first = await refresh(session.refresh_token);
    expect(first.status).toBe(200);
    const rotated = (await first.json()) as Tokens;
    expect(rotated.refresh_token).not.toBe(session.refresh_token);
    expect(rotated.access_token).not.toBe(session.access_token);
    expect(rotated.expires_in).toBe(1800);

    await control('/clock', { advanceMs: 29 * MINUTE });
    const reuse = await refresh(session.refresh_token);
    expect(reuse.status).toBe(200);
    const reused = (await reuse.json()) as Tokens;
    expect(reused.refresh_token).not.toBe(rotated.refresh_token);
    expect(reused.access_token).not.toBe(rotated.access_token);
    expect(reused.expires_in).toBe(1800);

    await control('/clock', { advanceMs: 2 * MINUTE });
    const stale = await refresh(session.refresh_token);
    expect(stale.status).toBe(400);
    expect(await stale.json()).toEqual({ error: 'invalid_grant' });

    // Both branches of the fork stay live and rotate as usual.
    for (const branch of [rotated.refresh_token, reused.refresh_token]) {
      const next = await refresh(branch);
      expect(next.status).toBe(200);
      expect(((await next.json()) as Tokens).refresh_token).not.toBe(branch);
    }
    expect(await stats()).toMatchObject({ refreshGrants: 4, refreshReusedInGrace: 1, invalidGrants: 1 });
  });

  it('access tokens expire after 30 minutes; refresh tokens after 60 days unused; unknown ones are invalid_grant', async () => {
    const session = await login();
    await control('/clock', { advanceMs: 30 * MINUTE });
    const expired = await api('GET', sandbox.urls.connectionsUrl, session.access_token);
    expect(expired.status).toBe(401);
    expect(((await expired.json()) as Json).Detail).toMatch(/^TokenExpired: token expired at /);
    expect(expired.headers.get('www-authenticate')).toMatch(/^Bearer error="invalid_token"/);

    const renewed = (await (await refresh(session.refresh_token)).json()) as Tokens;
    expect((await api('GET', sandbox.urls.connectionsUrl, renewed.access_token)).status).toBe(200);

    await control('/clock', { advanceMs: 60 * 24 * 60 * MINUTE });
    expect((await refresh(renewed.refresh_token)).status).toBe(400);
    const unknown = await refresh('not-a-token');
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toEqual({ error: 'invalid_grant' });
    expect((await api('GET', sandbox.urls.connectionsUrl, 'garbage')).status).toBe(401);
  });

  it('stop working once revoked, and every connection of the user to the app goes (not only the grant’s)', async () => {
    // Another consent of the same user, made earlier: revocation removes its connection too.
    const earlier = sandbox.state.createTenant({ name: 'Earlier consent', connectOnAuthorize: false }).id;
    const { grant: other } = sandbox.state.createGrant({ tenantIds: [earlier] });
    const session = await login();
    const res = await fetch(sandbox.urls.revocationUrl, {
      method: 'POST',
      headers: { authorization: basic(), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: session.refresh_token }),
    });
    expect(res.status).toBe(200);
    expect((await refresh(session.refresh_token)).status).toBe(400);
    expect(await (await api('GET', sandbox.urls.connectionsUrl, session.access_token)).json()).toEqual([]);
    expect(other.connections.size).toBe(0);
    expect(sandbox.state.identity.userConnections(sandbox.state.client.clientId)).toEqual([]);
  });
});

describe('tenants and invoices', () => {
  it('refuses a missing xero-tenant-id and a tenant the token is not connected to (403 AuthenticationUnsuccessful)', async () => {
    const session = await login();
    const other = await control<Json>('/tenants', { name: 'Other Org', connectOnAuthorize: false });
    expect(other.status).toBe(201);

    const missing = await api('PUT', `${sandbox.urls.apiBaseUrl}/Invoices`, session.access_token, {
      body: { Invoices: [sandboxInvoice()] },
    });
    expect(missing.status).toBe(403);
    expect(await missing.json()).toMatchObject({ Status: 403, Detail: 'AuthenticationUnsuccessful' });
    const foreign = await putInvoices({ ...session, tenantId: other.body.id as string }, [sandboxInvoice()]);
    expect(foreign.status).toBe(403);
    expect(await foreign.json()).toMatchObject({
      Title: 'Forbidden',
      Status: 403,
      Detail: 'AuthenticationUnsuccessful',
    });

    // Connecting the tenant to the grant (the user adds an organisation) lets the call through.
    const authEventId = ((await control<Json[]>('/grants')).body[0] as Json).authEventId;
    await control(`/grants/${authEventId}/connections`, { tenantId: other.body.id });
    expect(
      (await putInvoices({ ...session, tenantId: other.body.id as string }, [sandboxInvoice()])).status,
    ).toBe(200);
  });

  it('creates an invoice in Xero’s shape and returns it by id', async () => {
    const session = await login();
    const res = await putInvoices(session, [sandboxInvoice()]);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-minlimit-remaining')).toBe('59');
    const body = (await res.json()) as Json & { Invoices: Json[] };
    expect(body).toMatchObject({ Status: 'OK', ProviderName: 'Xero Sandbox' });
    expect(body.Id).toMatch(/^[0-9a-f-]{36}$/);
    expect(body.DateTimeUTC).toMatch(/^\/Date\(\d+\)\/$/);
    const created = body.Invoices[0] as Json;
    expect(created).toMatchObject({
      Type: 'ACCREC',
      InvoiceNumber: 'INV-0001',
      Reference: 'PO-1001',
      Status: 'DRAFT',
      CurrencyCode: 'USD',
      SubTotal: 47.49,
      TotalTax: 0,
      Total: 47.49,
      AmountDue: 47.49,
      DateString: '2024-05-01T00:00:00',
      Date: '/Date(1714521600000+0000)/',
      DueDateString: '2024-05-31T00:00:00',
      Contact: { Name: 'Acme Ltd', ContactStatus: 'ACTIVE' },
      HasErrors: false,
    });
    expect(created.InvoiceID).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    expect((created.LineItems as Json[])[0]).toMatchObject({
      Description: 'Widgets',
      Quantity: 3,
      LineAmount: 37.5,
    });

    const one = await api(
      'GET',
      `${sandbox.urls.apiBaseUrl}/Invoices/${created.InvoiceID}`,
      session.access_token,
      {
        tenantId: session.tenantId,
      },
    );
    expect(one.status).toBe(200);
    expect(((await one.json()) as { Invoices: Json[] }).Invoices[0]).toEqual(created);
    const byNumber = await api('GET', `${sandbox.urls.apiBaseUrl}/Invoices/INV-0001`, session.access_token, {
      tenantId: session.tenantId,
    });
    expect(byNumber.status).toBe(200);
    const search = await api(
      'GET',
      `${sandbox.urls.apiBaseUrl}/Invoices?where=${encodeURIComponent('Reference=="PO-1001" AND Status=="DRAFT"')}`,
      session.access_token,
      { tenantId: session.tenantId },
    );
    expect(((await search.json()) as { Invoices: Json[] }).Invoices).toHaveLength(1);
    const missing = await api(
      'GET',
      `${sandbox.urls.apiBaseUrl}/Invoices/${crypto.randomUUID()}`,
      session.access_token,
      {
        tenantId: session.tenantId,
      },
    );
    expect(missing.status).toBe(404);
  });

  it('replays an Idempotency-Key instead of creating a second invoice; a different body under it is refused', async () => {
    const session = await login();
    const key = crypto.randomUUID();
    const first = await putInvoices(session, [sandboxInvoice()], { 'Idempotency-Key': key });
    const firstBody = (await first.json()) as { Invoices: Json[] };
    const second = await putInvoices(session, [sandboxInvoice()], { 'Idempotency-Key': key });
    expect(second.status).toBe(200);
    expect(await second.json()).toEqual(firstBody);

    const conflicting = await putInvoices(session, [sandboxInvoice({ Reference: 'PO-9999' })], {
      'Idempotency-Key': key,
    });
    expect(conflicting.status).toBe(400);
    expect(await conflicting.json()).toMatchObject({ ErrorNumber: 10, Type: 'ValidationException' });

    expect(sandbox.state.tenants.get(session.tenantId)?.invoices.size).toBe(1);
    const s = await stats();
    expect(s.invoicesCreated).toEqual({ [session.tenantId]: 1 });
    expect(s).toMatchObject({ invoiceCalls: 3, idempotentReplays: 1, idempotencyConflicts: 1 });

    // Without the key, or with another key, the same body is a new invoice.
    await putInvoices(session, [sandboxInvoice()], { 'Idempotency-Key': crypto.randomUUID() });
    expect((await stats()).invoicesCreated[session.tenantId]).toBe(2);
  });

  it('checks CurrencyCode against the spec’s enum, puts contact messages on the Contact, and rounds UnitAmount to two places without unitdp', async () => {
    const session = await login();
    const bad = await putInvoices(session, [sandboxInvoice({ CurrencyCode: 'XYZ', Contact: { Name: ' ' } })]);
    expect(bad.status).toBe(400);
    const element = ((await bad.json()) as { Elements: Json[] }).Elements[0] as {
      ValidationErrors: { Message: string }[];
      Contact: { ValidationErrors: { Message: string }[]; HasValidationErrors: boolean };
    };
    expect(element.ValidationErrors.map((e) => e.Message)).toContain("The currency code 'XYZ' is not valid");
    expect(element.Contact).toMatchObject({ HasValidationErrors: true });
    expect(element.Contact.ValidationErrors.length).toBe(1);

    const line = [{ Description: 'Fine', Quantity: 1, UnitAmount: 0.1234, AccountCode: '200' }];
    const rounded = await putInvoices(session, [sandboxInvoice({ LineItems: line, CurrencyCode: 'NZD' })]);
    const four = await putInvoices(
      session,
      [sandboxInvoice({ LineItems: line, CurrencyCode: 'NZD' })],
      {},
      '?unitdp=4',
    );
    const unit = async (res: Response) => {
      const body = (await res.json()) as { Invoices: { LineItems: Json[] }[] };
      return body.Invoices[0]?.LineItems[0]?.UnitAmount;
    };
    expect(await unit(rounded)).toBe(0.12);
    expect(await unit(four)).toBe(0.1234);
  });

  it('answers validation failures in Xero’s ValidationException shape and stores nothing', async () => {
    const session = await login();
    const res = await putInvoices(session, [
      sandboxInvoice(),
      sandboxInvoice({ Contact: undefined, LineItems: [] }),
      sandboxInvoice({ LineItems: [{ Description: 'Refund?', Quantity: -1, UnitAmount: 5 }] }),
    ]);
    expect(res.status).toBe(400);
    const body = (await res.json()) as Json & { Elements: { ValidationErrors: { Message: string }[] }[] };
    expect(body).toMatchObject({
      ErrorNumber: 10,
      Type: 'ValidationException',
      Message: 'A validation exception occurred',
    });
    expect(body.Elements).toHaveLength(2);
    expect(body.Elements[0]?.ValidationErrors.map((e) => e.Message)).toEqual([
      'A Contact must be specified with this type of transaction',
      'At least one line item must be specified',
    ]);
    // Line errors sit on the line item, not on the invoice.
    const lines = body.Elements[1] as unknown as { ValidationErrors: unknown[]; LineItems: Json[] };
    expect(lines.ValidationErrors).not.toContainEqual({ Message: 'Line item Quantity must not be negative' });
    expect(lines.LineItems[0]?.ValidationErrors).toEqual([
      { Message: 'Line item Quantity must not be negative' },
    ]);
    expect(sandbox.state.tenants.get(session.tenantId)?.invoices.size).toBe(0);

    // summarizeErrors=false: the good ones are created, the bad ones come back flagged.
    const partial = await putInvoices(
      session,
      [sandboxInvoice(), sandboxInvoice({ Contact: {} })],
      {},
      '?summarizeErrors=false',
    );
    expect(partial.status).toBe(200);
    const results = ((await partial.json()) as { Invoices: Json[] }).Invoices;
    expect(results.map((r) => r.StatusAttributeString)).toEqual(['OK', 'ERROR']);
    expect((await stats()).invoicesCreated[session.tenantId]).toBe(1);
  });
});

describe('rate limits', () => {
  it('allows the per-minute quota, then 429 with Retry-After until the window moves on', async () => {
    const session = await login();
    await control('/limits', { perMinute: 3 });
    for (let i = 0; i < 3; i++) expect((await putInvoices(session, [sandboxInvoice()])).status).toBe(200);
    const limited = await putInvoices(session, [sandboxInvoice()]);
    expect(limited.status).toBe(429);
    expect(limited.headers.get('x-rate-limit-problem')).toBe('minute');
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(limited.headers.get('x-minlimit-remaining')).toBe('0');

    await control('/clock', { advanceMs: retryAfter * 1000 });
    expect((await putInvoices(session, [sandboxInvoice()])).status).toBe(200);
    expect(await stats()).toMatchObject({ rateLimited: 1, rateLimitedByProblem: { minute: 1 } });
  });

  it('refuses calls beyond the concurrent limit', async () => {
    const session = await login();
    await control('/limits', { concurrent: 2, latencyMs: 150 });
    const results = await Promise.all(
      Array.from({ length: 4 }, () => putInvoices(session, [sandboxInvoice()])),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 429, 429]);
    const limited = results.find((r) => r.status === 429);
    expect(limited?.headers.get('x-rate-limit-problem')).toBe('concurrent');
    // Xero sends Retry-After for the minute and day limits only.
    expect(limited?.headers.get('retry-after')).toBeNull();
    expect((await stats()).rateLimitedByProblem).toMatchObject({ concurrent: 2 });
  });
});

describe('faults', () => {
  it('500 and 429 fail the next N matching calls, then calls go through', async () => {
    const session = await login();
    await control('/faults', { target: 'invoices', kind: '500', count: 2 });
    await control('/faults', { target: 'invoices', kind: '429', retryAfterSeconds: 7 });
    expect((await control<Json[]>('/faults')).body).toHaveLength(2);

    const a = await putInvoices(session, [sandboxInvoice()]);
    expect(a.status).toBe(500);
    expect(await a.json()).toMatchObject({ Status: 500, Title: 'An error occurred' });
    expect((await putInvoices(session, [sandboxInvoice()])).status).toBe(500);
    const limited = await putInvoices(session, [sandboxInvoice()]);
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('7');
    expect(limited.headers.get('x-rate-limit-problem')).toBe('minute');
    expect((await putInvoices(session, [sandboxInvoice()])).status).toBe(200);

    // Targets are respected: a token fault leaves invoices alone.
    await control('/faults', { target: 'token', kind: '500' });
    expect((await putInvoices(session, [sandboxInvoice()])).status).toBe(200);
    expect((await refresh(session.refresh_token)).status).toBe(500);
    expect((await refresh(session.refresh_token)).status).toBe(200);
    expect((await stats()).faultsFired).toMatchObject({ '500': 3, '429': 1 });
    expect((await stats()).invoicesCreated[session.tenantId]).toBe(2);
  });

  it('hang holds the response for hangMs then answers 504, or until the client gives up', async () => {
    const session = await login();
    await control('/faults', { target: 'connections', kind: 'hang', hangMs: 200 });
    const started = performance.now();
    const res = await api('GET', sandbox.urls.connectionsUrl, session.access_token);
    expect(res.status).toBe(504);
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);

    await control('/faults', { target: 'invoices', kind: 'hang' }); // default: effectively forever
    await expect(
      api('PUT', `${sandbox.urls.apiBaseUrl}/Invoices`, session.access_token, {
        tenantId: session.tenantId,
        body: { Invoices: [sandboxInvoice()] },
        signal: AbortSignal.timeout(300),
      }),
    ).rejects.toThrow(/abort|timeout/i);
    expect((await stats()).faultsFired.hang).toBe(2);
    expect((await stats()).invoicesCreated).toEqual({});
  });

  it('drop performs the call but the client gets a network error; a keyed retry is answered from the store', async () => {
    const session = await login();
    await control('/faults', { target: 'invoices', kind: 'drop' });
    const key = crypto.randomUUID();
    await expect(putInvoices(session, [sandboxInvoice()], { 'Idempotency-Key': key })).rejects.toThrow(
      TypeError,
    );

    const stored = [...(sandbox.state.tenants.get(session.tenantId)?.invoices.values() ?? [])];
    expect(stored).toHaveLength(1);

    const retry = await putInvoices(session, [sandboxInvoice()], { 'Idempotency-Key': key });
    expect(retry.status).toBe(200);
    expect(((await retry.json()) as { Invoices: Json[] }).Invoices[0]?.InvoiceID).toBe(stored[0]?.InvoiceID);
    const s = await stats();
    expect(s.invoicesCreated).toEqual({ [session.tenantId]: 1 });
    expect(s).toMatchObject({ invoiceCalls: 2, idempotentReplays: 1, faultsFired: { drop: 1 } });
  });

  it('a dropped refresh still rotates; retrying the old token inside the grace window gets a fresh pair', async () => {
    const session = await login();
    await control('/faults', { target: 'token', kind: 'drop' });
    await expect(refresh(session.refresh_token)).rejects.toThrow(TypeError);

    const grant = sandbox.state.identity.grants()[0];
    const lost = grant?.current.refreshToken;
    expect(lost).not.toBe(session.refresh_token);

    const recovered = (await (await refresh(session.refresh_token)).json()) as Tokens;
    expect(recovered.refresh_token).not.toBe(lost);
    expect(recovered.refresh_token).toBe(grant?.current.refreshToken);
    expect(await stats()).toMatchObject({ refreshGrants: 2, refreshReusedInGrace: 1 });
  });

  it('503 and any-target faults work too; the control API validates its input', async () => {
    const session = await login();
    await control('/faults', { target: 'any', kind: '503' });
    expect((await api('GET', sandbox.urls.connectionsUrl, session.access_token)).status).toBe(503);
    expect((await api('GET', sandbox.urls.connectionsUrl, session.access_token)).status).toBe(200);

    const bad = await control('/faults', { target: 'everything', kind: 'explode' });
    expect(bad.status).toBe(400);
  });
});

describe('control API', () => {
  it('reports stats and resets everything', async () => {
    const session = await login();
    await putInvoices(session, [sandboxInvoice()]);
    const before = await stats();
    expect(before).toMatchObject({
      invoicesCreated: { [session.tenantId]: 1 },
      invoiceCalls: 1,
      authorizations: 1,
      authCodeGrants: 1,
      calls: { authorize: 1, token: 1, connections: 1, invoices: 1 },
    });

    const grants = await control<{ authEventId: string; tokens: Tokens }>('/grants', {});
    expect(grants.status).toBe(201);
    expect(grants.body.tokens.refresh_token).toBeTruthy();

    const reset = await control('/reset', {});
    expect(reset.status).toBe(200);
    expect((await stats()).invoiceCalls).toBe(0);
    expect((await control<Json[]>('/tenants')).body).toEqual([]);
    expect((await refresh(session.refresh_token)).status).toBe(400);
  });
});
