import type { XeroConfig } from '../config.js';

// Xero over fetch: every call has a timeout, and every answer is classified into what the caller
// does next, so the ticks never parse HTTP themselves.

export interface TokenSet {
  accessToken: string;
  refreshToken: string;
  expiresAt: Date;
  /** The scopes Xero granted (the token response's `scope`), when it said. */
  scope?: string | null;
}

export type RefreshOutcome =
  | { kind: 'ok'; tokens: TokenSet }
  | { kind: 'invalid_grant' }
  /** The client id or secret is wrong (rotated, mistyped): configuration, not this grant. */
  | { kind: 'invalid_client' }
  /** Xero answered without a refresh token: the consent lacked `offline_access`. */
  | { kind: 'no_refresh_token' }
  | { kind: 'transient'; reason: string };

/** X-Rate-Limit-Problem on a 429 (Xero's API limits guide). */
export type RateLimitProblem = 'minute' | 'day' | 'appminute' | 'concurrent';

/** What Xero's answer headers said of the remaining budgets; null where a header was absent. */
export interface LimitSignals {
  minRemaining: number | null;
  dayRemaining: number | null;
  appMinRemaining: number | null;
}

export type PushOutcome = (
  | { kind: 'ok'; invoiceId: string }
  /** `retryAfterSeconds` is null where Xero sends no Retry-After (appminute, concurrent). */
  | { kind: 'rate_limited'; problem: RateLimitProblem | null; retryAfterSeconds: number | null }
  | { kind: 'invalid'; message: string }
  | { kind: 'unauthorized' }
  /** 403: the tenant was disconnected in Xero, or the grant lacks a scope. Not transient. */
  | { kind: 'forbidden'; detail: string }
  /**
   * The invoice may or may not exist. `cached`: an answer Xero keeps under the Idempotency-Key (its
   * internal error, 500, or a 200 we could not read), so a resend under the key only replays it.
   */
  | { kind: 'transient'; reason: string; cached?: boolean }
) & { limits?: LimitSignals };

/** What a lookup by marker found: `absent`, or `ok` with the invoice; otherwise as a push. */
export type LookupOutcome =
  | Exclude<PushOutcome, { kind: 'invalid' }>
  | ({ kind: 'absent' } & { limits?: LimitSignals });

export interface XeroTenant {
  tenantId: string;
  tenantName: string | null;
  /** The connection's `id`: what DELETE /connections/{id} takes. */
  connectionId: string | null;
  authEventId: string | null;
}

export type DisconnectOutcome = 'ok' | 'not_found' | 'unauthorized' | 'failed';

export interface XeroClient {
  /** The authorization code grant, with the flow's PKCE verifier (RFC 7636 §4.5). */
  exchangeCode(code: string, redirectUri: string, codeVerifier: string): Promise<RefreshOutcome>;
  refresh(refreshToken: string): Promise<RefreshOutcome>;
  /** The tenants of one consent when `authEventId` is given; without it, every tenant of the user. */
  connections(accessToken: string, authEventId?: string): Promise<XeroTenant[]>;
  /** Disconnects one tenant (DELETE /connections/{id}); the grant's other tenants stay. */
  disconnect(accessToken: string, connectionId: string): Promise<DisconnectOutcome>;
  putInvoice(
    accessToken: string,
    tenantId: string,
    idempotencyKey: string,
    invoice: unknown,
  ): Promise<PushOutcome>;
  /**
   * The invoice whose `Url` is `marker`, by GET Invoices `where` (docs/xero.md): one call, first page.
   */
  findInvoice(accessToken: string, tenantId: string, marker: string): Promise<LookupOutcome>;
  /** The `Url` a push's invoice carries: this server's address of the push (docs/xero.md). */
  marker(pushId: string): string;
  // No revoke(): Xero's /connect/revocation "Revokes a users refresh token and removes all their
  // connections to your app" (xero-node README, revokeToken), every tenant of that Xero user, including
  // tenants other organizations of ours hold. Disconnecting uses DELETE /connections/{id} only.
}

/** Xero keeps an Idempotency-Key to 128 characters ("128 character max.", xero_accounting.yaml). */
export const IDEMPOTENCY_KEY_MAX = 128;

/** A push's key: its id, then `<id>:<generation>` once a lookup has ruled the old key's invoice out. */
export function idempotencyKeyOf(pushId: string, generation: number): string {
  const key = generation === 0 ? pushId : `${pushId}:${generation}`;
  if (key.length > IDEMPOTENCY_KEY_MAX) throw new Error('idempotency key longer than Xero keeps');
  return key;
}

/**
 * The marker: the push's resource on this server (`GET /api/invoices/{id}`), on the origin of
 * XERO_REDIRECT_URI, which is this server's public address. `Url` is "URL link to a source document"
 * (xero_accounting.yaml), so the organization's input (`reference`) keeps its own field.
 */
export function invoiceMarker(redirectUri: string, pushId: string): string {
  return `${new URL(redirectUri).origin}/api/invoices/${encodeURIComponent(pushId)}`;
}

export function createXeroClient(config: XeroConfig, fetchImpl: typeof fetch = fetch): XeroClient {
  const basic = `Basic ${btoa(`${config.clientId ?? ''}:${config.clientSecret ?? ''}`)}`;
  /**
   * One Xero call, request and reading of the answer both under the timeout. A plain AbortController
   * and timer rather than AbortSignal.timeout(): on Node the latter builds a transferable signal on
   * every call, which cost more CPU than the rest of a push's client side (profiled).
   */
  const call = async <T>(url: string, init: RequestInit, read: (res: Response) => Promise<T>): Promise<T> => {
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(new DOMException('The Xero call timed out', 'TimeoutError')),
      config.timeoutMs,
    );
    try {
      return await read(await fetchImpl(url, { ...init, signal: controller.signal }));
    } finally {
      clearTimeout(timer);
    }
  };

  const tokenGrant = async (form: Record<string, string>): Promise<RefreshOutcome> => {
    let res: Response;
    let body: Record<string, unknown>;
    try {
      [res, body] = await call(
        `${config.identityUrl}/connect/token`,
        {
          method: 'POST',
          headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams(form),
        },
        async (r) => [r, (await r.json().catch(() => ({}))) as Record<string, unknown>] as const,
      );
    } catch (err) {
      return { kind: 'transient', reason: transportReason(err) };
    }
    if (res.ok && typeof body.access_token === 'string') {
      if (typeof body.refresh_token !== 'string') return { kind: 'no_refresh_token' };
      const expiresIn = typeof body.expires_in === 'number' ? body.expires_in : 1800;
      return {
        kind: 'ok',
        tokens: {
          accessToken: body.access_token,
          refreshToken: body.refresh_token,
          expiresAt: new Date(Date.now() + expiresIn * 1000),
          scope: typeof body.scope === 'string' ? body.scope : null,
        },
      };
    }
    if (res.status === 400 && body.error === 'invalid_grant') return { kind: 'invalid_grant' };
    // RFC 6749 5.2 lets the server answer 400 or 401 for a client that failed to authenticate.
    if ((res.status === 400 || res.status === 401) && body.error === 'invalid_client')
      return { kind: 'invalid_client' };
    return { kind: 'transient', reason: `token endpoint answered ${res.status}` };
  };

  return {
    exchangeCode: (code, redirectUri, codeVerifier) =>
      tokenGrant({
        grant_type: 'authorization_code',
        code,
        redirect_uri: redirectUri,
        code_verifier: codeVerifier,
      }),
    refresh: (refreshToken) => tokenGrant({ grant_type: 'refresh_token', refresh_token: refreshToken }),

    async connections(accessToken, authEventId) {
      const query = authEventId ? `?${new URLSearchParams({ authEventId })}` : '';
      const list = await call(
        `${config.apiUrl}/connections${query}`,
        { headers: { authorization: `Bearer ${accessToken}` } },
        async (res) => {
          if (!res.ok) throw new Error(`Xero /connections answered ${res.status}`);
          return (await res.json()) as {
            id?: string;
            authEventId?: string;
            tenantId: string;
            tenantName?: string | null;
            tenantType?: string;
          }[];
        },
      );
      return (
        list
          .filter((t) => t.tenantType === undefined || t.tenantType === 'ORGANISATION')
          // Belt and braces: a server that ignored the filter must not hand us another consent's tenants.
          .filter((t) => !authEventId || t.authEventId === undefined || t.authEventId === authEventId)
          .map((t) => ({
            tenantId: t.tenantId,
            tenantName: t.tenantName ?? null,
            connectionId: t.id ?? null,
            authEventId: t.authEventId ?? null,
          }))
      );
    },

    async disconnect(accessToken, connectionId) {
      try {
        return await call(
          `${config.apiUrl}/connections/${encodeURIComponent(connectionId)}`,
          { method: 'DELETE', headers: { authorization: `Bearer ${accessToken}` } },
          async (res): Promise<DisconnectOutcome> => {
            await res.body?.cancel();
            if (res.ok) return 'ok';
            if (res.status === 404) return 'not_found';
            if (res.status === 401 || res.status === 403) return 'unauthorized';
            return 'failed';
          },
        );
      } catch {
        return 'failed';
      }
    },

    marker: (pushId) => invoiceMarker(config.redirectUri, pushId),

    async findInvoice(accessToken, tenantId, marker) {
      // `where` "Filter by an any element"; `page=1` answers at most 100 (the spec's `page`), and a
      // marker names one invoice. A quote cannot occur in the marker (it is a URL we built).
      const query = new URLSearchParams({ where: `Url=="${marker}"`, page: '1' });
      try {
        return await call(
          `${config.apiUrl}/api.xro/2.0/Invoices?${query}`,
          {
            headers: {
              authorization: `Bearer ${accessToken}`,
              'xero-tenant-id': tenantId,
              accept: 'application/json',
            },
          },
          lookupOutcome,
        );
      } catch (err) {
        return { kind: 'transient', reason: transportReason(err) };
      }
    },

    async putInvoice(accessToken, tenantId, idempotencyKey, invoice) {
      try {
        return await call(
          // unitdp=4: without it Xero rounds UnitAmount to two places (the spec's UnitPrice: "By default
          // UnitPrice is rounded to two decimal places. You can use 4 decimal places by adding the
          // unitdp=4 querystring parameter").
          `${config.apiUrl}/api.xro/2.0/Invoices?unitdp=4`,
          {
            method: 'PUT',
            headers: {
              authorization: `Bearer ${accessToken}`,
              'xero-tenant-id': tenantId,
              'idempotency-key': idempotencyKey,
              'content-type': 'application/json',
              accept: 'application/json',
            },
            body: JSON.stringify({ Invoices: [invoice] }),
          },
          pushOutcome,
        );
      } catch (err) {
        return { kind: 'transient', reason: transportReason(err) };
      }
    },
  };
}

async function lookupOutcome(res: Response): Promise<LookupOutcome> {
  const limits = limitSignals(res.headers);
  const outcome = await classifyLookup(res);
  return limits ? { ...outcome, limits } : outcome;
}

async function classifyLookup(res: Response): Promise<LookupOutcome> {
  if (res.ok) {
    const body = (await res.json().catch(() => null)) as { Invoices?: InvoiceAnswer[] } | null;
    if (!body || !Array.isArray(body.Invoices))
      return { kind: 'transient', reason: 'unreadable lookup answer' };
    // Oldest first as Xero lists them; more than one would be a duplicate made before this lookup.
    const invoiceId = body.Invoices.find((i) => typeof i.InvoiceID === 'string')?.InvoiceID;
    return invoiceId ? { kind: 'ok', invoiceId } : { kind: 'absent' };
  }
  const outcome = await classify(res);
  // A 400 to a lookup is our query's fault, not the invoice's: retried, and visible in last_error.
  if (outcome.kind === 'invalid')
    return { kind: 'transient', reason: `Xero refused the lookup: ${outcome.message}` };
  return outcome;
}

async function pushOutcome(res: Response): Promise<PushOutcome> {
  const limits = limitSignals(res.headers);
  const outcome = await classify(res);
  return limits ? { ...outcome, limits } : outcome;
}

const ZERO_ID = '00000000-0000-0000-0000-000000000000';

interface InvoiceAnswer {
  InvoiceID?: string;
  HasErrors?: boolean;
  StatusAttributeString?: string;
  ValidationErrors?: { Message?: string }[];
  Contact?: { ValidationErrors?: { Message?: string }[] };
  LineItems?: { ValidationErrors?: { Message?: string }[] }[];
}

async function classify(res: Response): Promise<PushOutcome> {
  if (res.ok) {
    const body = (await res.json().catch(() => ({}))) as { Invoices?: InvoiceAnswer[] };
    const invoice = body.Invoices?.[0];
    // A 200 can still carry a rejected invoice (summarizeErrors=false): HasErrors, an ERROR status
    // attribute, or the all-zero InvoiceID Xero gives an element it did not create.
    if (invoice && (invoice.HasErrors === true || invoice.StatusAttributeString === 'ERROR'))
      return { kind: 'invalid', message: validationMessages([invoice]) };
    const invoiceId = invoice?.InvoiceID;
    if (invoiceId === ZERO_ID) return { kind: 'invalid', message: validationMessages([invoice ?? {}]) };
    return invoiceId
      ? { kind: 'ok', invoiceId }
      : { kind: 'transient', reason: 'no InvoiceID in the answer', cached: true };
  }
  if (res.status === 429) {
    await res.body?.cancel();
    const problem = res.headers.get('x-rate-limit-problem')?.toLowerCase() ?? null;
    const retryAfter = Number(res.headers.get('retry-after') ?? Number.NaN);
    return {
      kind: 'rate_limited',
      problem: isProblem(problem) ? problem : null,
      retryAfterSeconds: Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : null,
    };
  }
  if (res.status === 401) {
    await res.body?.cancel();
    return { kind: 'unauthorized' };
  }
  if (res.status === 403) {
    const body = (await res.json().catch(() => ({}))) as { Detail?: string; Title?: string };
    return { kind: 'forbidden', detail: String(body.Detail ?? body.Title ?? 'Forbidden').slice(0, 200) };
  }
  if (res.status === 400) {
    const body = (await res.json().catch(() => ({}))) as { Message?: string; Elements?: InvoiceAnswer[] };
    return { kind: 'invalid', message: validationMessages(body.Elements ?? [], body.Message) };
  }
  await res.body?.cancel();
  // "If an idempotent request errors out internally, the error will be cached" (Xero's "Idempotent
  // requests" guide): a 500 is that internal error. A 502, 503 or 504 is taken to come from in front of
  // the key (the guide is silent; dev/xero-sandbox/README.md), so a retry under the key may help.
  return { kind: 'transient', reason: `Xero answered ${res.status}`, cached: res.status === 500 };
}

const PROBLEMS: readonly string[] = ['minute', 'day', 'appminute', 'concurrent'];
const isProblem = (p: string | null): p is RateLimitProblem => p !== null && PROBLEMS.includes(p);

/** X-MinLimit-Remaining, X-DayLimit-Remaining, X-AppMinLimit-Remaining; undefined when none came. */
export function limitSignals(headers: Headers): LimitSignals | undefined {
  const read = (name: string) => {
    const raw = headers.get(name);
    if (raw === null || raw.trim() === '') return null;
    const n = Number(raw);
    return Number.isInteger(n) && n >= 0 ? n : null;
  };
  const limits = {
    minRemaining: read('x-minlimit-remaining'),
    dayRemaining: read('x-daylimit-remaining'),
    appMinRemaining: read('x-appminlimit-remaining'),
  };
  return limits.minRemaining === null && limits.dayRemaining === null && limits.appMinRemaining === null
    ? undefined
    : limits;
}

/**
 * Xero's ValidationErrors sit on the invoice element, on its Contact and on each LineItem; the first
 * few, with where they sit, are what an operator needs. "A validation exception occurred" (the
 * top-level Message) only when no element says more.
 */
function validationMessages(elements: InvoiceAnswer[], fallback?: string): string {
  const messages: string[] = [];
  const add = (where: string, errors: { Message?: string }[] | undefined) => {
    for (const e of errors ?? []) if (e.Message) messages.push(where ? `${where}: ${e.Message}` : e.Message);
  };
  for (const element of elements) {
    add('', element.ValidationErrors);
    add('Contact', element.Contact?.ValidationErrors);
    (element.LineItems ?? []).forEach((line, i) => void add(`LineItems[${i}]`, line.ValidationErrors));
  }
  const unique = [...new Set(messages)];
  return (unique.slice(0, 5).join('; ') || fallback || 'validation failed').slice(0, 1000);
}

function transportReason(err: unknown): string {
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) return 'timeout';
  return 'network error';
}

/** The `authentication_event_id` claim of a Xero access token (a JWT), or null if it has none. */
export function authEventIdOf(accessToken: string): string | null {
  const payload = accessToken.split('.')[1];
  if (!payload) return null;
  try {
    const json = JSON.parse(atob(payload.replace(/-/g, '+').replace(/_/g, '/'))) as Record<string, unknown>;
    return typeof json.authentication_event_id === 'string' ? json.authentication_event_id : null;
  } catch {
    return null;
  }
}
