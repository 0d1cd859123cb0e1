import type { Context } from 'hono';
import { errorBody } from './error-body.js';
import { methodNotAllowed } from './health.js';
import { Hono } from './hono.js';

const SCRAPE_METHODS = 'GET, HEAD, OPTIONS';

import { PROMETHEUS_CONTENT_TYPE } from '../metrics/registry.js';

export interface MetricsEndpoint {
  render(c: Context): Promise<string>;
  /** When set, GET /metrics requires `Authorization: Bearer <token>`. */
  token: string | undefined;
}

export function metricsRoutes(endpoint: MetricsEndpoint): Hono {
  const routes = new Hono();
  routes.get('/metrics', async (c) => {
    if (!hasMetricsToken(c.req.header('authorization'), endpoint.token)) return unauthorized();
    return c.body(await endpoint.render(c), 200, {
      'content-type': PROMETHEUS_CONTENT_TYPE,
      'cache-control': 'no-store',
    });
  });
  // OPTIONS is answered as RFC 9110 says (204, Allow): a scrape is never an HAProxy health check.
  routes.options('/metrics', (c) => c.body(null, 204, { allow: SCRAPE_METHODS }));
  routes.all('/metrics', () => methodNotAllowed(SCRAPE_METHODS));
  return routes;
}

/** True when no token is configured, or the Authorization header carries it as a bearer token. */
export function hasMetricsToken(authorization: string | undefined, token: string | undefined): boolean {
  return token === undefined || sameSecret(authorization, `Bearer ${token}`);
}

export const unauthorized = () =>
  Response.json(errorBody('unauthorized', 'a metrics token is required'), {
    status: 401,
    headers: { 'www-authenticate': 'Bearer' },
  });

// Compares every character whatever the first difference, so the time taken says nothing about the token.
function sameSecret(given: string | undefined, expected: string): boolean {
  if (given === undefined || given.length !== expected.length) return false;
  let diff = 0;
  for (let i = 0; i < expected.length; i++) diff |= given.charCodeAt(i) ^ expected.charCodeAt(i);
  return diff === 0;
}
