import type { XeroConfig } from '../config.js';

// Xero over fetch: every call has a timeout, and every answer is classified into what the caller
// does next, so the ticks never parse HTTP themselves.

export interface TokenSet {
  accessToken: string;
  refreshToken: string;
  expiresAt: Date;
}

export type RefreshOutcome =
  | { kind: 'ok'; tokens: TokenSet }
  | { kind: 'invalid_grant' }
  | { kind: 'transient'; reason: string };

export type PushOutcome =
  | { kind: 'ok'; invoiceId: string }
  | { kind: 'rate_limited'; retryAfterSeconds: number }
  | { kind: 'invalid'; message: string }
  | { kind: 'unauthorized' }
  | { kind: 'transient'; reason: string };

export interface XeroTenant {
  tenantId: string;
  tenantName: string | null;
}

export interface XeroClient {
  exchangeCode(code: string, redirectUri: string): Promise<RefreshOutcome>;
  refresh(refreshToken: string): Promise<RefreshOutcome>;
  connections(accessToken: string): Promise<XeroTenant[]>;
  putInvoice(
    accessToken: string,
    tenantId: string,
    idempotencyKey: string,
    invoice: unknown,
  ): Promise<PushOutcome>;
  /** Best effort: tells Xero the grant is no longer wanted. */
  revoke(refreshToken: string): Promise<boolean>;
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
    if (res.ok && typeof body.access_token === 'string' && typeof body.refresh_token === 'string') {
      const expiresIn = typeof body.expires_in === 'number' ? body.expires_in : 1800;
      return {
        kind: 'ok',
        tokens: {
          accessToken: body.access_token,
          refreshToken: body.refresh_token,
          expiresAt: new Date(Date.now() + expiresIn * 1000),
        },
      };
    }
    if (res.status === 400 && body.error === 'invalid_grant') return { kind: 'invalid_grant' };
    return { kind: 'transient', reason: `token endpoint answered ${res.status}` };
  };

  return {
    exchangeCode: (code, redirectUri) =>
      tokenGrant({ grant_type: 'authorization_code', code, redirect_uri: redirectUri }),
    refresh: (refreshToken) => tokenGrant({ grant_type: 'refresh_token', refresh_token: refreshToken }),

    async connections(accessToken) {
      const list = await call(
        `${config.apiUrl}/connections`,
        { headers: { authorization: `Bearer ${accessToken}` } },
        async (res) => {
          if (!res.ok) throw new Error(`Xero /connections answered ${res.status}`);
          return (await res.json()) as {
            tenantId: string;
            tenantName?: string | null;
            tenantType?: string;
          }[];
        },
      );
      return list
        .filter((t) => t.tenantType === undefined || t.tenantType === 'ORGANISATION')
        .map((t) => ({ tenantId: t.tenantId, tenantName: t.tenantName ?? null }));
    },

    async revoke(refreshToken) {
      try {
        return await call(
          `${config.identityUrl}/connect/revocation`,
          {
            method: 'POST',
            headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams({ token: refreshToken }),
          },
          async (res) => res.ok,
        );
      } catch {
        return false;
      }
    },

    async putInvoice(accessToken, tenantId, idempotencyKey, invoice) {
      try {
        return await call(
          `${config.apiUrl}/api.xro/2.0/Invoices`,
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

async function pushOutcome(res: Response): Promise<PushOutcome> {
  if (res.ok) {
    const body = (await res.json().catch(() => ({}))) as { Invoices?: { InvoiceID?: string }[] };
    const invoiceId = body.Invoices?.[0]?.InvoiceID;
    return invoiceId
      ? { kind: 'ok', invoiceId }
      : { kind: 'transient', reason: 'no InvoiceID in the answer' };
  }
  if (res.status === 429) {
    const retryAfter = Number(res.headers.get('retry-after'));
    return {
      kind: 'rate_limited',
      retryAfterSeconds: Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : 60,
    };
  }
  if (res.status === 401) return { kind: 'unauthorized' };
  if (res.status === 400) return { kind: 'invalid', message: await validationMessage(res) };
  return { kind: 'transient', reason: `Xero answered ${res.status}` };
}

// Xero's ValidationException lists messages per element; the first few are what an operator needs.
async function validationMessage(res: Response): Promise<string> {
  const body = (await res.json().catch(() => ({}))) as {
    Message?: string;
    Elements?: { ValidationErrors?: { Message?: string }[] }[];
  };
  const messages = (body.Elements ?? []).flatMap((e) =>
    (e.ValidationErrors ?? []).map((v) => v.Message ?? ''),
  );
  return (messages.filter(Boolean).slice(0, 3).join('; ') || body.Message || 'validation failed').slice(
    0,
    500,
  );
}

function transportReason(err: unknown): string {
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) return 'timeout';
  return 'network error';
}

/** Our stored invoice, in Xero's shape: a draft sales invoice. */
export function toXeroInvoice(input: {
  contact: { name: string };
  lineItems: { description: string; quantity: string; unitAmount: string; accountCode?: string }[];
  date: string;
  dueDate?: string;
  currency: string;
  reference?: string;
}) {
  return {
    Type: 'ACCREC',
    Status: 'DRAFT',
    Contact: { Name: input.contact.name },
    LineItems: input.lineItems.map((l) => ({
      Description: l.description,
      Quantity: l.quantity,
      UnitAmount: l.unitAmount,
      ...(l.accountCode ? { AccountCode: l.accountCode } : {}),
    })),
    Date: input.date,
    ...(input.dueDate ? { DueDate: input.dueDate } : {}),
    CurrencyCode: input.currency,
    ...(input.reference ? { Reference: input.reference } : {}),
  };
}
