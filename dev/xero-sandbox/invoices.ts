// The Invoices endpoints: create (PUT, or POST) with Idempotency-Key replay, get one, list.
import { type Context, Hono } from 'hono';
import { type ApiEnv, envelope, requireScope } from './api-guards.js';
import {
  json,
  notFound,
  postDataInvalid,
  problem,
  serverError,
  validationBody,
  validationException,
} from './errors.js';
import { isInternalFault } from './faults.js';
import { canonicalJson, IDEMPOTENCY_KEY_MAX } from './idempotency.js';
import { checkInvoice, invoiceJson, rejectedInvoiceJson, storeInvoice } from './invoice-model.js';
import { listFilter, parseWhere } from './invoice-query.js';
import type { SandboxState } from './state.js';

const WRITE_SCOPES = ['accounting.transactions', 'accounting.invoices'];
const READ_SCOPES = [...WRITE_SCOPES, 'accounting.transactions.read', 'accounting.invoices.read'];
/** GET /Invoices `page`: "Up to 100 invoices will be returned in a single API call" by default. */
const PAGE_SIZE = 100;
/** The spec's `pageSize` names no maximum; the sandbox's choice (README). */
const MAX_PAGE_SIZE = 1000;

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function parseJson(raw: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(raw) };
  } catch {
    return { ok: false };
  }
}

/** Runs a create request for real (no idempotency involved); a pending internal `500` fails it instead. */
function createInvoices(state: SandboxState, c: Context<ApiEnv>, raw: string): Response {
  if (isInternalFault(state.faults.peek('invoices'), c.req.method, 'invoices')) {
    state.faults.take('invoices');
    state.stats.faultsFired['500'] += 1;
    return serverError();
  }
  const tenant = c.get('tenant');
  const parsed = parseJson(raw);
  if (!parsed.ok) return postDataInvalid('Invalid JSON data: the request body could not be parsed');
  const body = parsed.value;
  const submitted = isRecord(body)
    ? Array.isArray(body.Invoices)
      ? body.Invoices
      : 'Invoices' in body
        ? null
        : [body]
    : null;
  if (submitted === null) return postDataInvalid('Invoices must be an array of invoices');

  const now = state.now();
  const summarizeErrors = (c.req.query('summarizeErrors') ?? 'true').toLowerCase() !== 'false';
  const numbers = new Set<string>();
  // unitdp=4 opts in to four decimal places of UnitAmount; anything else keeps two (the spec's unitdp).
  const unitdp = c.req.query('unitdp') === '4' ? 4 : 2;
  const checks = submitted.map((invoice) => checkInvoice(invoice, tenant, now, numbers, unitdp));
  const rejected = checks.filter((check) => !check.ok).length;
  state.stats.validationErrors += rejected;
  if (summarizeErrors && rejected > 0) {
    return json(
      400,
      validationBody(
        checks.flatMap((check, i) => (check.ok ? [] : [rejectedInvoiceJson(submitted[i], check.errors)])),
      ),
    );
  }
  const invoices = checks.map((check, i) => {
    if (!check.ok)
      return { ...rejectedInvoiceJson(submitted[i], check.errors), StatusAttributeString: 'ERROR' };
    const invoice = storeInvoice(tenant, check.draft, now);
    state.stats.invoicesCreated[tenant.id] = (state.stats.invoicesCreated[tenant.id] ?? 0) + 1;
    return { ...invoiceJson(tenant, invoice), ...(summarizeErrors ? {} : { StatusAttributeString: 'OK' }) };
  });
  return json(200, envelope(state, { Invoices: invoices }));
}

/**
 * Idempotency-Key, per app (the token's client): the first request with a key runs, and its response
 * (200, a validation 400, or an internal 500) is stored for 6 minutes from that first call; a retry
 * with the same key and the same request (tenant, method, path, query, JSON body ignoring key order)
 * gets the stored response. After 6 minutes the key is new again. The same key with a different
 * request is refused with 400, and a retry while the first is still running with 409.
 */
async function createWithIdempotency(state: SandboxState, c: Context<ApiEnv>): Promise<Response> {
  const raw = await c.req.text();
  const key = c.req.header('idempotency-key');
  if (key === undefined || key === '') return createInvoices(state, c, raw);
  if (key.length > IDEMPOTENCY_KEY_MAX) {
    return validationException([`Idempotency-Key must be no more than ${IDEMPOTENCY_KEY_MAX} characters`]);
  }
  const tenant = c.get('tenant');
  const parsed = parseJson(raw);
  const url = new URL(c.req.url);
  url.searchParams.sort();
  const fingerprint = `${tenant.id} ${c.req.method} ${url.pathname}?${url.searchParams} ${parsed.ok ? canonicalJson(parsed.value) : raw}`;
  const app = c.get('grant').clientId;
  const claim = state.idempotency.claim(app, key, fingerprint, state.now());
  switch (claim.kind) {
    case 'replay':
      state.stats.idempotentReplays += 1;
      return new Response(claim.response.body, {
        status: claim.response.status,
        headers: { 'content-type': claim.response.contentType, 'x-xero-sandbox-idempotent-replay': 'true' },
      });
    case 'mismatch':
      state.stats.idempotencyConflicts += 1;
      return validationException([
        'This Idempotency-Key has already been used with a different request. Use a new key for a new request.',
      ]);
    case 'in-progress':
      state.stats.idempotencyConflicts += 1;
      return problem(409, 'Conflict', 'A request with this Idempotency-Key is already in progress');
    case 'new':
      break;
  }
  let response: Response;
  try {
    response = createInvoices(state, c, raw);
  } catch (error) {
    state.idempotency.abandon(app, key);
    throw error;
  }
  state.idempotency.complete(app, key, {
    status: response.status,
    body: await response.clone().text(),
    contentType: response.headers.get('content-type') ?? 'application/json; charset=utf-8',
  });
  return response;
}

/** Mounted under the API prefix after the token, tenant and rate-limit guards. */
export function invoiceRoutes(state: SandboxState): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  const write = requireScope(state, WRITE_SCOPES);
  const read = requireScope(state, READ_SCOPES);

  app.put('/Invoices', write, (c) => createWithIdempotency(state, c));
  app.post('/Invoices', write, (c) => createWithIdempotency(state, c));

  app.get('/Invoices', read, (c) => {
    const tenant = c.get('tenant');
    const query = c.req.query();
    const where = query.where ? parseWhere(query.where) : () => true;
    if (!where) {
      return json(400, {
        ErrorNumber: 16,
        Type: 'QueryParseException',
        Message:
          'The sandbox supports only Field=="value", Field!=null and Field=Guid("...") terms joined by AND in where',
      });
    }
    const filter = listFilter(query);
    const matching = [...tenant.invoices.values()].filter((i) => filter(i, tenant) && where(i, tenant));
    const page = Number(query.page);
    if (!(Number.isInteger(page) && page >= 1)) {
      return json(200, envelope(state, { Invoices: matching.map((i) => invoiceJson(tenant, i)) }));
    }
    // Paged as the spec's example answer is: `pagination` beside the page's invoices.
    const asked = Number(query.pageSize);
    const pageSize = Number.isInteger(asked) && asked >= 1 ? Math.min(asked, MAX_PAGE_SIZE) : PAGE_SIZE;
    const invoices = matching.slice((page - 1) * pageSize, page * pageSize);
    return json(
      200,
      envelope(state, {
        pagination: {
          page,
          pageSize,
          pageCount: Math.ceil(matching.length / pageSize),
          itemCount: matching.length,
        },
        Invoices: invoices.map((i) => invoiceJson(tenant, i)),
      }),
    );
  });

  // Xero accepts an InvoiceID or an InvoiceNumber here.
  app.get('/Invoices/:id', read, (c) => {
    const tenant = c.get('tenant');
    const id = c.req.param('id');
    const invoice =
      tenant.invoices.get(id) ??
      tenant.invoices.get(id.toLowerCase()) ??
      [...tenant.invoices.values()].find(
        (i) => i.InvoiceNumber !== '' && i.InvoiceNumber.toLowerCase() === id.toLowerCase(),
      );
    if (!invoice) return notFound();
    return json(200, envelope(state, { Invoices: [invoiceJson(tenant, invoice)] }));
  });

  return app;
}
