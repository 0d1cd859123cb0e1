import { BodyBudget, Hono, type Logger } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import { apiHeaders } from './api-headers.js';
import type { ApiKeyRegistry } from './api-key-registry.js';
import { type AuthEnv, requireApiKey } from './auth.js';
import type { ApiLimits, WebhookConfig, XeroConfig } from './config.js';
import { connectLinkRoutes } from './connections/connect-link-routes.js';
import { connectRoutes } from './connections/connect-routes.js';
import { connectionRoutes } from './connections/routes.js';
import { invoiceRoutes } from './invoices/routes.js';
import { KeyRateLimiter, limitKeyRate } from './rate-limit.js';
import { webhookRoutes } from './webhooks/routes.js';
import type { Resolver } from './webhooks/ssrf.js';
import type { XeroClient } from './xero/client.js';

export interface AppRoutesDeps {
  apiKeys: ApiKeyRegistry;
  xero: XeroClient;
  xeroConfig: XeroConfig;
  box: SecretBox;
  log: Logger;
  /** The tick that pushes invoices: new work (an invoice, a connection) schedules it at once. */
  pushTick: string;
  limits: ApiLimits;
  webhooks: WebhookConfig;
  /** node:dns on Node and Bun (the SSRF guard at registration); none on Workers. */
  resolve?: Resolver;
  deliveryTick: string;
}

/** The app's routes: the Xero connect flow and the API behind an API key. */
export function appRoutes({
  apiKeys,
  xero,
  xeroConfig,
  box,
  log,
  pushTick,
  limits,
  webhooks,
  resolve,
  deliveryTick,
}: AppRoutesDeps): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  for (const path of ['/api', '/api/*', '/connect', '/connect/*']) app.use(path, apiHeaders);
  app.route(
    '/connect',
    connectRoutes({ xero, config: xeroConfig, box, log, pushTick, clientRate: limits.clientRate }),
  );
  const api = new Hono<AuthEnv>();
  api.use('*', requireApiKey(apiKeys), limitKeyRate(new KeyRateLimiter(limits.rate), limits.rate));
  api.route(
    '/connect-links',
    connectLinkRoutes({ config: xeroConfig, maxPendingFlows: limits.maxPendingConnectFlows }),
  );
  api.route(
    '/invoices',
    invoiceRoutes({
      pushTick,
      maxPendingInvoices: limits.maxPendingInvoices,
      maxPendingBytes: limits.maxPendingBytes,
      // Built once per process or isolate, as these routes are: the budget is theirs together.
      bodyBudget: new BodyBudget(limits.bodiesMaxBytes),
    }),
  );
  api.route('/connections', connectionRoutes({ xero, box, log, pushTick }));
  api.route(
    '/webhook-endpoints',
    webhookRoutes({ box, config: webhooks, deliveryTick, ...(resolve ? { resolve } : {}) }),
  );
  app.route('/api', api);
  return app;
}
