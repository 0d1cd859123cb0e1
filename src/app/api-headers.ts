import type { MiddlewareHandler } from 'hono';

/**
 * Headers on every API and connect-flow answer, errors included (set after the handler, so the 401s,
 * 404s and error bodies the shell writes get them too). `no-store`: the answers are one organization's
 * data or a one-time redirect, and no cache on the way may keep them (RFC 9111 section 5.2.2.5).
 * `nosniff`: a browser must take the JSON as JSON, never sniff it into script or HTML (Fetch standard,
 * "X-Content-Type-Options").
 */
export const apiHeaders: MiddlewareHandler = async (c, next) => {
  await next();
  c.res.headers.set('cache-control', 'no-store');
  c.res.headers.set('x-content-type-options', 'nosniff');
};
