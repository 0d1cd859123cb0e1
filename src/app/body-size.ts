import type { Context, MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';

// A declared Content-Length is checked without touching the body: the runtime's HTTP parser already
// holds the body to that length, and reading `c.req.raw.body` (what Hono's bodyLimit does first) makes
// @hono/node-server build a full web Request for every POST, a cost per request. Only chunked
// bodies, whose size is unknown until read, go through bodyLimit's counting stream.
export function limitBodySize(maxBytes: number, tooLarge: (c: Context) => Response): MiddlewareHandler {
  // The client may still be sending: the server reads and discards the rest, then closes
  // (platform/http/node-early-answers.ts), and says so.
  const onTooLarge = (c: Context) => {
    const res = tooLarge(c);
    res.headers.set('connection', 'close');
    return res;
  };
  const chunked = bodyLimit({ maxSize: maxBytes, onError: onTooLarge });
  return async (c, next) => {
    const declared = c.req.header('content-length');
    if (declared === undefined) return chunked(c, next);
    if (Number(declared) > maxBytes) return onTooLarge(c);
    await next();
  };
}
