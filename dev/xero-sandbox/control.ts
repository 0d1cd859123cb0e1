// The control API (/_control, JSON): lets tests and demos shape the sandbox over HTTP: tenants, faults,
// clock, limits, grants, the next authorization's outcome; stats and reset. Never faulted or limited.
import { type Context, Hono } from 'hono';
import { z } from 'zod';
import { json } from './errors.js';
import { FAULT_KINDS, FAULT_TARGETS } from './faults.js';
import { invoiceJson } from './invoice-model.js';
import type { Grant } from './oauth.js';
import type { SandboxState, Tenant } from './state.js';
import { sandboxUrls } from './urls.js';

const limit = z.number().int().positive().nullable();

const schemas = {
  tenant: z.strictObject({
    name: z.string().min(1),
    id: z.string().min(1).optional(),
    baseCurrency: z
      .string()
      .regex(/^[A-Za-z]{3}$/)
      .optional(),
    countryCode: z.string().min(2).max(3).optional(),
    accountCodes: z.array(z.string().min(1)).nullable().optional(),
    connectOnAuthorize: z.boolean().optional(),
  }),
  fault: z.strictObject({
    target: z.enum(FAULT_TARGETS),
    kind: z.enum(FAULT_KINDS),
    count: z.number().int().positive().optional(),
    retryAfterSeconds: z.number().int().nonnegative().optional(),
    problem: z.enum(['minute', 'concurrent', 'day', 'appminute']).optional(),
    hangMs: z.number().int().nonnegative().optional(),
  }),
  clock: z.strictObject({ advanceMs: z.number().finite().nonnegative() }),
  limits: z.strictObject({
    concurrent: limit.optional(),
    perMinute: limit.optional(),
    perDay: limit.optional(),
    appPerMinute: limit.optional(),
    latencyMs: z.number().int().nonnegative().optional(),
    minuteMs: z.number().int().positive().optional(),
    dayMs: z.number().int().positive().optional(),
  }),
  grant: z.strictObject({ scope: z.string().min(1).optional(), tenantIds: z.array(z.string()).optional() }),
  connection: z.strictObject({ tenantId: z.string().min(1) }),
  revoke: z.union([
    z.strictObject({ authEventId: z.string().min(1) }),
    z.strictObject({ refreshToken: z.string().min(1) }),
  ]),
  authorize: z.strictObject({
    deny: z.boolean().optional(),
    tenantIds: z.array(z.string()).optional(),
    grantScope: z.string().optional(),
  }),
};

type Parsed<T> = { ok: true; data: T } | { ok: false; response: Response };

async function body<T>(c: Context, schema: z.ZodType<T>): Promise<Parsed<T>> {
  const raw = await c.req.text();
  let value: unknown = {};
  if (raw.trim() !== '') {
    try {
      value = JSON.parse(raw);
    } catch {
      return { ok: false, response: json(400, { error: 'invalid_json' }) };
    }
  }
  const result = schema.safeParse(value);
  if (!result.success)
    return { ok: false, response: json(400, { error: 'invalid_request', issues: result.error.issues }) };
  return { ok: true, data: result.data };
}

export function tenantJson(tenant: Tenant): Record<string, unknown> {
  return {
    id: tenant.id,
    name: tenant.name,
    tenantType: tenant.tenantType,
    baseCurrency: tenant.baseCurrency,
    countryCode: tenant.countryCode,
    connectOnAuthorize: tenant.connectOnAuthorize,
    invoices: tenant.invoices.size,
    contacts: tenant.contacts.size,
  };
}

function grantJson(grant: Grant): Record<string, unknown> {
  return {
    authEventId: grant.authEventId,
    scope: grant.scope.join(' '),
    createdAt: new Date(grant.createdAt).toISOString(),
    revoked: grant.revokedAt !== null,
    tenantIds: [...grant.connections.keys()],
    current: {
      accessToken: grant.current.accessToken,
      refreshToken: grant.current.refreshToken,
      accessExpiresAt: new Date(grant.current.accessExpiresAt).toISOString(),
    },
  };
}

function clockJson(state: SandboxState): Record<string, unknown> {
  const now = state.now();
  return { now, iso: new Date(now).toISOString(), offsetMs: state.clock.offsetMs };
}

export function controlRoutes(state: SandboxState): Hono {
  const app = new Hono();

  app.get('/', (c) =>
    json(200, {
      ...sandboxUrls(new URL(c.req.url).origin),
      clientId: state.client.clientId,
      clientSecret: state.client.clientSecret,
      endpoints: [
        'GET  /_control/stats',
        'POST /_control/reset',
        'GET|POST /_control/clock {advanceMs}',
        'GET|POST /_control/limits {concurrent?, perMinute?, perDay?, appPerMinute?, latencyMs?, minuteMs?, dayMs?}',
        'GET|POST|DELETE /_control/faults {target, kind, count?, retryAfterSeconds?, problem?, hangMs?}',
        'GET|POST /_control/tenants {name, id?, baseCurrency?, countryCode?, accountCodes?, connectOnAuthorize?}',
        'GET  /_control/invoices?tenantId=',
        'GET|POST /_control/grants {scope?, tenantIds?}',
        'POST /_control/grants/:authEventId/connections {tenantId}',
        "POST /_control/revoke {authEventId} (one grant) | {refreshToken} (as /connect/revocation: all the user's connections)",
        'POST /_control/authorize {deny?, tenantIds?, grantScope?}',
      ],
    }),
  );

  app.get('/stats', () => json(200, state.statsSnapshot()));

  app.post('/reset', () => {
    state.reset();
    return json(200, { ok: true });
  });

  app.get('/clock', () => json(200, clockJson(state)));
  app.post('/clock', async (c) => {
    const parsed = await body(c, schemas.clock);
    if (!parsed.ok) return parsed.response;
    state.clock.advance(parsed.data.advanceMs);
    return json(200, clockJson(state));
  });

  app.get('/limits', () => json(200, state.limiter.limits));
  app.post('/limits', async (c) => {
    const parsed = await body(c, schemas.limits);
    if (!parsed.ok) return parsed.response;
    return json(200, state.setLimits(parsed.data));
  });

  app.get('/faults', () => json(200, state.faults.list()));
  app.post('/faults', async (c) => {
    const parsed = await body(c, schemas.fault);
    if (!parsed.ok) return parsed.response;
    return json(201, state.faults.add(parsed.data));
  });
  app.delete('/faults', () => {
    state.faults.clear();
    return json(200, { ok: true });
  });

  app.get('/tenants', () => json(200, [...state.tenants.values()].map(tenantJson)));
  app.post('/tenants', async (c) => {
    const parsed = await body(c, schemas.tenant);
    if (!parsed.ok) return parsed.response;
    if (parsed.data.id && state.tenants.has(parsed.data.id)) return json(409, { error: 'tenant_exists' });
    return json(201, tenantJson(state.createTenant(parsed.data)));
  });

  app.get('/invoices', (c) => {
    const tenantId = c.req.query('tenantId');
    const tenants = [...state.tenants.values()].filter((t) => !tenantId || t.id === tenantId);
    return json(
      200,
      tenants.flatMap((tenant) =>
        [...tenant.invoices.values()].map((invoice) => ({
          tenantId: tenant.id,
          ...invoiceJson(tenant, invoice),
        })),
      ),
    );
  });

  app.get('/grants', () => json(200, state.identity.grants().map(grantJson)));
  app.post('/grants', async (c) => {
    const parsed = await body(c, schemas.grant);
    if (!parsed.ok) return parsed.response;
    const unknown = (parsed.data.tenantIds ?? []).filter((id) => !state.tenants.has(id));
    if (unknown.length > 0) return json(400, { error: 'unknown_tenant', tenantIds: unknown });
    const { grant, tokens } = state.createGrant(parsed.data);
    return json(201, { authEventId: grant.authEventId, tenantIds: [...grant.connections.keys()], tokens });
  });
  app.post('/grants/:authEventId/connections', async (c) => {
    const parsed = await body(c, schemas.connection);
    if (!parsed.ok) return parsed.response;
    const grant = state.identity.grant(c.req.param('authEventId'));
    if (!grant || grant.revokedAt !== null) return json(404, { error: 'unknown_grant' });
    if (!state.tenants.has(parsed.data.tenantId)) return json(400, { error: 'unknown_tenant' });
    const connection = state.identity.connect(grant, parsed.data.tenantId, state.now());
    return json(201, connection);
  });

  // {authEventId}: that one grant stops working and loses its connections (a test lever).
  // {refreshToken}: what POST /connect/revocation does, every connection of the user to the app goes.
  app.post('/revoke', async (c) => {
    const parsed = await body(c, schemas.revoke);
    if (!parsed.ok) return parsed.response;
    const now = state.now();
    const revoked =
      'authEventId' in parsed.data
        ? state.identity.revokeGrant(parsed.data.authEventId, now)
        : state.identity.revokeRefreshToken(parsed.data.refreshToken, null, now);
    if (revoked) state.stats.revocations += 1;
    return json(revoked ? 200 : 404, { revoked });
  });

  app.post('/authorize', async (c) => {
    const parsed = await body(c, schemas.authorize);
    if (!parsed.ok) return parsed.response;
    const plan = {
      deny: parsed.data.deny ?? false,
      tenantIds: parsed.data.tenantIds ?? null,
      grantScope: parsed.data.grantScope ?? null,
    };
    state.authorizePlans.push(plan);
    return json(201, { queued: state.authorizePlans.length, plan });
  });

  return app;
}
