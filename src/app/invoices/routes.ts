import { BodyBudget, Hono, jsonAnswer, limitBodies, validate } from '@honest-health/platform';
import { sha256Hex } from '@honest-health/platform/crypto';
import { optional, strictObject, uuid, enum as zenum } from 'zod/mini';
import type { AuthEnv } from '../auth.js';
import { ApiError, errorBody } from '../errors.js';
import { pageFields, pageOf, readPageQuery } from '../pages.js';
import { PUSH_STATUSES } from '../schema.js';
import { type BlockedState, type ControlOutcome, cancelPush, retryPush } from './control.js';
import { fieldErrors, IDEMPOTENCY_KEY, invoiceInput } from './input.js';
import { PendingInvoiceQuota, utf8Length } from './quota.js';
import { createPush, findPush, findPushByKey, isChosenTenant, listPushes } from './store.js';
import { acceptedView, listItemView, pushView } from './view.js';

export const MAX_BODY_BYTES = 1024 * 1024;
/** What a full list page stays under, whatever the invoices: 200 items of bounded fields. */
export const LIST_PAGE_MAX_BYTES = 512 * 1024;

export interface InvoiceRoutesDeps {
  /** The tick that pushes a queued invoice: scheduled at once, not left for its next interval. */
  pushTick: string;
  /** ORG_MAX_PENDING_INVOICES. */
  maxPendingInvoices?: number;
  /** ORG_MAX_PENDING_BYTES. */
  maxPendingBytes?: number;
  /** REQUEST_BODIES_MAX_BYTES: the bodies of every POST in flight in this process or isolate. */
  bodyBudget?: BodyBudget;
}

function requireIdempotencyKey(key: string | undefined): string {
  if (key === undefined || !IDEMPOTENCY_KEY.test(key)) {
    throw new ApiError(
      400,
      'invalid_idempotency_key',
      'Idempotency-Key must be 1 to 128 visible ASCII characters',
      [
        {
          path: 'Idempotency-Key',
          message: key === undefined ? 'required' : 'must be 1 to 128 visible ASCII characters',
        },
      ],
    );
  }
  return key;
}

const BLOCKED: Record<'retry' | 'cancel', (state: BlockedState) => string> = {
  retry: (state) =>
    state === 'in_flight'
      ? 'the push is being sent to Xero now; retry it if it fails'
      : `only a dead or failed push can be retried; this one is ${state}`,
  cancel: (state) =>
    state === 'in_flight'
      ? 'the push is being sent to Xero now, so it may reach Xero; it cannot be cancelled'
      : state === 'in_doubt'
        ? 'an earlier attempt may have created the invoice in Xero; it cannot be cancelled'
        : `only a queued, failed or awaiting_connection push can be cancelled; this one is ${state}`,
};

/** The answer to a refused, unknown or conflicting transition; undefined when it happened. */
function refused(action: 'retry' | 'cancel', outcome: ControlOutcome) {
  if (outcome.kind === 'not_found') throw new ApiError(404, 'not_found', 'no such invoice');
  if (outcome.kind === 'key_conflict') {
    throw new ApiError(409, 'idempotency_conflict', 'this Idempotency-Key was used to retry another invoice');
  }
  if (outcome.kind !== 'blocked') return undefined;
  return {
    error: { code: 'invalid_state', message: BLOCKED[action](outcome.state), state: outcome.state },
    invoice: listItemView(outcome.push),
  };
}

export function invoiceRoutes({
  pushTick,
  maxPendingInvoices = 10_000,
  maxPendingBytes = 1024 * 1024 * 1024,
  bodyBudget = new BodyBudget(8 * MAX_BODY_BYTES),
}: InvoiceRoutesDeps) {
  const routes = new Hono<AuthEnv>();
  const quota = new PendingInvoiceQuota(maxPendingInvoices, maxPendingBytes);

  routes.post(
    '/',
    limitBodies({
      budget: bodyBudget,
      maxBodyBytes: MAX_BODY_BYTES,
      tooLarge: (c) =>
        c.json(errorBody('payload_too_large', `the body must be at most ${MAX_BODY_BYTES} bytes`), 413),
    }),
    async (c) => {
      const key = requireIdempotencyKey(c.req.header('idempotency-key'));
      const type = c.req.header('content-type') ?? '';
      if (!/^application\/json\s*(;|$)/i.test(type)) {
        throw new ApiError(415, 'unsupported_media_type', 'the body must be application/json');
      }
      let body: unknown;
      try {
        // The raw request's text, not c.req.text(): Hono would keep that copy until the answer.
        body = JSON.parse(await c.req.raw.text());
      } catch {
        throw new ApiError(400, 'malformed_json', 'the body is not valid JSON');
      }
      const parsed = validate(invoiceInput, body);
      if (!parsed.success) {
        throw new ApiError(422, 'validation_failed', 'the invoice is not valid', fieldErrors(parsed.error));
      }
      const input = parsed.data;
      if (input.tenantId !== undefined) input.tenantId = input.tenantId.toLowerCase();
      // The payload is serialized once and that text goes to Postgres as it is; without a tenantId it
      // is also what the request hash is over (the tenant is part of the request, not the payload).
      // Without one, the input is the payload: no copy of it without the key.
      const { tenantId } = input;
      const payloadText = JSON.stringify(tenantId === undefined ? input : { ...input, tenantId: undefined });
      const hash = sha256Hex(tenantId === undefined ? payloadText : JSON.stringify(input));
      const payloadBytes = utf8Length(payloadText);
      const organization = c.get('organization');
      // c.get, not c.var: Hono builds c.var afresh from every variable on each read.
      const outcome = await c.get('withDatabase')(async (db) => {
        // A tenant the organization has not chosen is refused, unless this is a replay of a key
        // already used (answered as before, whatever the connection became since).
        if (tenantId !== undefined && !(await isChosenTenant(db, organization.id, tenantId))) {
          const existing = await findPushByKey(db, organization.id, key);
          return existing ? { push: existing, created: false } : undefined;
        }
        // Over the quota a replay is still answered as before; only a new invoice is refused.
        const verdict = await quota.admits(db, organization.id, payloadBytes);
        if (verdict !== 'ok') {
          const existing = await findPushByKey(db, organization.id, key);
          return existing ? { push: existing, created: false } : verdict;
        }
        const result = await createPush(
          db,
          organization.id,
          key,
          { tenantId, payloadText, payloadBytes },
          hash,
        );
        if (result.created) quota.added(organization.id, payloadBytes);
        return result;
      });
      if (outcome === 'bytes') {
        throw new ApiError(
          429,
          'quota_exceeded',
          `quota ORG_MAX_PENDING_BYTES: this organization's invoices waiting to be pushed would pass ${quota.maxBytes} bytes; new ones are accepted as those finish`,
          [{ path: 'quota', message: `pending invoice bytes: at most ${quota.maxBytes}` }],
        );
      }
      if (outcome === 'count') {
        throw new ApiError(
          429,
          'quota_exceeded',
          `quota ORG_MAX_PENDING_INVOICES: this organization already has ${quota.max} invoices waiting to be pushed; new ones are accepted as those finish`,
          [{ path: 'quota', message: `pending invoices: at most ${quota.max}` }],
        );
      }
      if (!outcome) {
        throw new ApiError(422, 'validation_failed', 'the invoice is not valid', [
          {
            path: 'tenantId',
            message:
              'is not a Xero tenant this organization chose: see GET /api/connections, then POST /api/connections/{id}/choose',
          },
        ]);
      }
      const { push, created } = outcome;
      if (!created && push.requestHash !== hash) {
        throw new ApiError(
          409,
          'idempotency_conflict',
          'this Idempotency-Key was used with a different body',
        );
      }
      if (created && push.status === 'queued') c.get('schedule')(pushTick);
      // Never the invoice back: an echo of up to 1 MiB per POST would be most of what a client receives.
      return jsonAnswer(c, acceptedView(push), created ? 202 : 200);
    },
  );

  const pushId = (id: string) => {
    if (!validate(uuid(), id).success) throw new ApiError(404, 'not_found', 'no such invoice');
    return id;
  };

  routes.post('/:id/retry', async (c) => {
    const id = pushId(c.req.param('id'));
    const key = requireIdempotencyKey(c.req.header('idempotency-key'));
    const organization = c.get('organization');
    const outcome = await c.var.withDatabase((db) => retryPush(db, organization.id, id, key));
    const conflict = refused('retry', outcome);
    if (conflict) return c.json(conflict, 409);
    if (outcome.kind !== 'changed' && outcome.kind !== 'unchanged') throw new Error('unreachable');
    if (outcome.kind === 'changed') c.var.schedule(pushTick);
    return c.json(pushView(outcome.push), outcome.kind === 'changed' ? 202 : 200);
  });

  routes.post('/:id/cancel', async (c) => {
    const id = pushId(c.req.param('id'));
    const organization = c.get('organization');
    const outcome = await c.var.withDatabase((db) => cancelPush(db, organization.id, id));
    const conflict = refused('cancel', outcome);
    if (conflict) return c.json(conflict, 409);
    if (outcome.kind !== 'changed' && outcome.kind !== 'unchanged') throw new Error('unreachable');
    return c.json(pushView(outcome.push), 200);
  });

  routes.all('/:id/retry', (c) =>
    c.json(errorBody('method_not_allowed', 'use POST'), 405, { allow: 'POST' }),
  );
  routes.all('/:id/cancel', (c) =>
    c.json(errorBody('method_not_allowed', 'use POST'), 405, { allow: 'POST' }),
  );

  routes.get('/:id', async (c) => {
    const id = c.req.param('id');
    const organization = c.get('organization');
    const push = validate(uuid(), id).success
      ? await c.var.withDatabase((db) => findPush(db, organization.id, id))
      : undefined;
    if (!push) throw new ApiError(404, 'not_found', 'no such invoice');
    return c.json(pushView(push));
  });

  const listQuery = strictObject({
    status: optional(zenum(PUSH_STATUSES, { error: () => `must be one of ${PUSH_STATUSES.join(', ')}` })),
    ...pageFields,
  });

  routes.get('/', async (c) => {
    const { status, after, limit } = readPageQuery(listQuery, c.req.query());
    const organization = c.get('organization');
    const rows = await c.var.withDatabase((db) =>
      listPushes(db, organization.id, { status, after, limit: limit + 1 }),
    );
    const { page, nextCursor } = pageOf(rows, limit);
    return c.json({ data: page.map(listItemView), nextCursor });
  });

  routes.all('/', (c) =>
    c.json(errorBody('method_not_allowed', 'use GET or POST'), 405, { allow: 'GET, POST' }),
  );
  routes.all('/:id', (c) => c.json(errorBody('method_not_allowed', 'use GET'), 405, { allow: 'GET' }));
  return routes;
}
