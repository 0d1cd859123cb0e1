import { Hono } from 'hono';
import { PROMETHEUS_CONTENT_TYPE } from './registry.js';

export interface MetricsEndpoint {
  render(): Promise<string>;
  /** When set, GET /metrics requires `Authorization: Bearer <token>`. */
  token: string | undefined;
}

export function metricsRoutes(endpoint: MetricsEndpoint): Hono {
  const routes = new Hono();
  routes.get('/metrics', async (c) => {
    if (
      endpoint.token !== undefined &&
      !sameSecret(c.req.header('authorization'), `Bearer ${endpoint.token}`)
    ) {
      return c.json({ error: { code: 'unauthorized', message: 'a metrics token is required' } }, 401, {
        'www-authenticate': 'Bearer',
      });
    }
    return c.body(await endpoint.render(), 200, {
      'content-type': PROMETHEUS_CONTENT_TYPE,
      'cache-control': 'no-store',
    });
  });
  return routes;
}

// Compares every character whatever the first difference, so the time taken says nothing about the token.
function sameSecret(given: string | undefined, expected: string): boolean {
  if (given === undefined || given.length !== expected.length) return false;
  let diff = 0;
  for (let i = 0; i < expected.length; i++) diff |= given.charCodeAt(i) ^ expected.charCodeAt(i);
  return diff === 0;
}
