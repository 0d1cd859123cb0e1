// A local stand-in for the parts of Xero an invoice importer talks to: OAuth2 identity, /connections,
// the Invoices API with Idempotency-Key, per-tenant rate limits, plus a control API for tests. A pure
// fetch handler (web-standard APIs only); server.ts serves it on Node. Development and tests only.
import { Hono } from 'hono';
import { type ApiEnv, rateLimit, requireAccessToken, requireTenant } from './api-guards.js';
import { connectionRoutes } from './connections.js';
import { controlRoutes } from './control.js';
import { notFound, serverError } from './errors.js';
import { faultMiddleware } from './faults.js';
import { identityRoutes } from './identity.js';
import { uuid } from './ids.js';
import { invoiceRoutes } from './invoices.js';
import { organisationRoutes } from './organisation.js';
import { type SandboxOptions, SandboxState } from './state.js';
import { API_PREFIX, CONNECTIONS_PATH, CONTROL_PREFIX, IDENTITY_PREFIX, routeTarget } from './urls.js';

export interface XeroSandbox {
  app: Hono;
  state: SandboxState;
}

export function createXeroSandbox(options: SandboxOptions = {}): XeroSandbox {
  const state = new SandboxState(options);
  const app = new Hono();

  // Count every non-control call on arrival, whatever becomes of it; tag responses like Xero does.
  app.use('*', async (c, next) => {
    const target = routeTarget(c.req.path);
    if (target === null) return next();
    state.stats.calls[target] += 1;
    if (target === 'invoices') state.stats.invoiceCalls += 1;
    await next();
    try {
      c.res.headers.set('xero-correlation-id', uuid());
    } catch {
      // immutable headers (never the case for our own responses): skip the tag
    }
  });

  app.route(CONTROL_PREFIX, controlRoutes(state));
  app.use('*', faultMiddleware(state));
  app.route(IDENTITY_PREFIX, identityRoutes(state));
  app.route(CONNECTIONS_PATH, connectionRoutes(state));

  const api = new Hono<ApiEnv>();
  api.use('*', requireAccessToken(state), requireTenant(state), rateLimit(state));
  api.route('/', invoiceRoutes(state));
  api.route('/', organisationRoutes(state));
  app.route(API_PREFIX, api);

  app.notFound(() => notFound());
  app.onError((error) => {
    console.error('xero-sandbox: unhandled error', error);
    return serverError();
  });

  return { app, state };
}

export type { SandboxOptions, TenantInput } from './state.js';
export { SandboxState } from './state.js';
