import type { Context, MiddlewareHandler } from 'hono';
import { routePath } from 'hono/route';
import { logContext, withLogContext } from '../util/log-context.js';
import type { Telemetry } from '../util/telemetry.js';
import { declareAnswerHeader, setAnswerHeader } from './answer-headers.js';
import { isProbeMethod, LIVENESS_PATHS } from './health.js';

// Every request: an id (the caller's x-request-id when it is sane, else a new one) that is echoed in
// the response and carried by every log line written while the request runs; a server span that the
// database spans nest under; and the request counted by route template and status.

const REQUEST_ID = /^[\w.:@/+=-]{1,128}$/;

export function observeRequests(telemetry: Telemetry): MiddlewareHandler {
  return async (c, next) => {
    // The Worker entry assigns the id before the app runs, so that its own answers carry one too.
    // Liveness touches nothing and logs nothing, and orchestrators call it every few seconds: it gets
    // no id, span or count: reading the request's headers and rebuilding the response's to echo an id
    // would cost more than the answer itself (bench:http).
    // Only GET, HEAD and OPTIONS (HAProxy's default) are liveness: any other method there is a caller's
    // mistake, answered (405) and observed like any other request.
    if (LIVENESS_PATHS.has(c.req.path) && isProbeMethod(c.req.method)) return next();
    const requestId = currentRequestId() ?? requestIdFrom(c.req.raw.headers);
    const { method } = c.req;
    const started = performance.now();
    declareAnswerHeader(c, 'x-request-id', requestId);
    let route = '';
    await withLogContext({ request_id: requestId }, () =>
      telemetry.tracing.active(
        method,
        {
          kind: 'server',
          headers: c.req.raw.headers,
          // The path without its query string: an OAuth callback carries its code there.
          attributes: { 'http.request.method': method, 'url.path': c.req.path, 'request.id': requestId },
        },
        async (span) => {
          await next();
          route = routeOf(c);
          const status = c.res.status;
          span.updateName(`${method} ${route}`);
          span.setAttributes({ 'http.route': route, 'http.response.status_code': status });
          if (status >= 500) span.fail(c.error);
        },
      ),
    );
    // On the response's own headers: c.header() would rebuild a finished response around its body
    // stream, which costs the Node adapter its fast path for every request.
    setAnswerHeader(c, 'x-request-id', requestId);
    telemetry.metrics.request(method, route, c.res.status, (performance.now() - started) / 1000);
  };
}

/** The caller's x-request-id when it is sane (no spaces, at most 128 characters), else a new one. */
export function requestIdFrom(headers: Headers): string {
  const given = headers.get('x-request-id');
  return given !== null && REQUEST_ID.test(given) ? given : crypto.randomUUID();
}

/** The request id of the request being served, for error reports; undefined outside a request. */
export function currentRequestId(): string | undefined {
  const id = logContext()?.request_id;
  return typeof id === 'string' ? id : undefined;
}

// The matched route's template (/api/orders/:id), never the raw path, so labels stay few. When only
// middleware matched (a 404), the template is a wildcard that says nothing: "unmatched".
function routeOf(c: Context): string {
  const route = routePath(c);
  return c.res.status === 404 && route.endsWith('*') ? 'unmatched' : route;
}
