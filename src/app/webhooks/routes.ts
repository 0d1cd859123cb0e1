import { Hono, validate } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import { strictObject, uuid } from 'zod/mini';
import type { AuthEnv } from '../auth.js';
import type { WebhookConfig } from '../config.js';
import { ApiError, errorBody } from '../errors.js';
import { pageFields, pageOf, readPageQuery } from '../pages.js';
import {
  createEndpoint,
  deleteEndpoint,
  listDeliveries,
  listEndpoints,
  resendDelivery,
  rotateSecret,
  updateEndpoint,
} from './endpoints.js';
import { checkEndpointUrl, checkResolved, type Resolver } from './ssrf.js';

export interface WebhookRoutesDeps {
  box: SecretBox;
  config: WebhookConfig;
  /** node:dns where the runtime has it: a name resolving to a refused address is refused at once. */
  resolve?: Resolver;
  /** The delivery tick: a resend schedules it. */
  deliveryTick: string;
}

const MAX_BODY = 16 * 1024;
const logQuery = strictObject(pageFields);

async function readObject(req: { header(name: string): string | undefined; text(): Promise<string> }) {
  if (!/^application\/json\s*(;|$)/i.test(req.header('content-type') ?? '')) {
    throw new ApiError(415, 'unsupported_media_type', 'the body must be application/json');
  }
  const text = await req.text();
  if (text.length > MAX_BODY)
    throw new ApiError(413, 'payload_too_large', `the body must be at most ${MAX_BODY} bytes`);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ApiError(400, 'malformed_json', 'the body is not valid JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ApiError(422, 'validation_failed', 'the body is not valid', [
      { path: '', message: 'must be an object' },
    ]);
  }
  return body as Record<string, unknown>;
}

export function webhookRoutes({ box, config, resolve, deliveryTick }: WebhookRoutesDeps) {
  const routes = new Hono<AuthEnv>();
  const invalid = (path: string, message: string) =>
    new ApiError(422, 'validation_failed', 'the endpoint is not valid', [{ path, message }]);

  /** The URL checked as registration checks it: its form and host, then its addresses where names resolve. */
  async function checkedUrl(value: unknown): Promise<string> {
    if (typeof value !== 'string') throw invalid('url', 'required: an https URL');
    const checked = checkEndpointUrl(value, config);
    if (!checked.ok) throw invalid('url', checked.message);
    const refused = await checkResolved(checked.url, resolve, config);
    if (refused) throw invalid('url', `must name a public host: ${refused}`);
    return checked.url.toString();
  }
  const endpointId = (id: string) => {
    if (!validate(uuid(), id).success) throw new ApiError(404, 'not_found', 'no such webhook endpoint');
    return id;
  };
  const notFound = () => new ApiError(404, 'not_found', 'no such webhook endpoint');

  routes.post('/', async (c) => {
    const body = await readObject(c.req);
    const unknown = Object.keys(body).filter((k) => k !== 'url');
    if (unknown.length > 0) throw invalid(unknown[0] as string, 'is not a field of a webhook endpoint');
    const url = await checkedUrl(body.url);
    const org = c.get('organization');
    const created = await c.var.withDatabase((db) => createEndpoint(db, box, org.id, url));
    return c.json(created, 201);
  });

  routes.get('/', async (c) => {
    const org = c.get('organization');
    return c.json({ data: await c.var.withDatabase((db) => listEndpoints(db, org.id)) });
  });

  routes.patch('/:id', async (c) => {
    const id = endpointId(c.req.param('id'));
    const body = await readObject(c.req);
    const unknown = Object.keys(body).filter((k) => k !== 'url' && k !== 'enabled');
    if (unknown.length > 0) throw invalid(unknown[0] as string, 'is not a field of a webhook endpoint');
    if (body.enabled !== undefined && body.enabled !== true)
      throw invalid('enabled', 'only true (re-enable) is accepted');
    const url = body.url === undefined ? undefined : await checkedUrl(body.url);
    const org = c.get('organization');
    const row = await c.var.withDatabase((db) =>
      updateEndpoint(db, org.id, id, { ...(url ? { url } : {}), enable: body.enabled === true }),
    );
    if (!row) throw notFound();
    return c.json(row);
  });

  routes.delete('/:id', async (c) => {
    const id = endpointId(c.req.param('id'));
    const org = c.get('organization');
    if (!(await c.var.withDatabase((db) => deleteEndpoint(db, org.id, id)))) throw notFound();
    return c.body(null, 204);
  });

  routes.post('/:id/rotate-secret', async (c) => {
    const id = endpointId(c.req.param('id'));
    const org = c.get('organization');
    const row = await c.var.withDatabase((db) => rotateSecret(db, box, org.id, id, config.secretOverlapMs));
    if (!row) throw notFound();
    return c.json(row);
  });

  // Keyset pages, as GET /api/invoices: `nextCursor` until the last page, where it is null.
  routes.get('/:id/deliveries', async (c) => {
    const id = endpointId(c.req.param('id'));
    const { after, limit } = readPageQuery(logQuery, c.req.query());
    const org = c.get('organization');
    const rows = await c.var.withDatabase((db) =>
      listDeliveries(db, org.id, id, { limit: limit + 1, after }),
    );
    if (!rows) throw notFound();
    const { page, nextCursor } = pageOf(rows, limit);
    return c.json({ data: page.map(({ cursorAt: _cursorAt, ...row }) => row), nextCursor });
  });

  routes.post('/:id/deliveries/:deliveryId/resend', async (c) => {
    const id = endpointId(c.req.param('id'));
    const deliveryId = c.req.param('deliveryId');
    if (!validate(uuid(), deliveryId).success) throw new ApiError(404, 'not_found', 'no such delivery');
    const org = c.get('organization');
    const outcome = await c.var.withDatabase((db) => resendDelivery(db, org.id, id, deliveryId));
    if (outcome === 'not_found') throw new ApiError(404, 'not_found', 'no such delivery');
    if (outcome === 'in_flight') {
      return c.json(
        { error: { code: 'invalid_state', message: 'the delivery is being sent now', state: 'in_flight' } },
        409,
      );
    }
    c.var.schedule(deliveryTick);
    return c.json({ id: deliveryId, status: 'pending' }, 202);
  });

  routes.all('*', (c) => c.json(errorBody('method_not_allowed', 'not allowed on this path'), 405));
  return routes;
}
