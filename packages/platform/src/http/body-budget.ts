import type { Context, MiddlewareHandler } from 'hono';
import { errorBody } from './error-body.js';

// Memory bounded by configuration: one body may be at most `maxBodyBytes`, and the bodies being read
// or handled at once at most `budget.maxBytes` together (per process; per isolate on Workers). A
// request beyond the budget is answered 503 with Retry-After before its body is read: its declared
// Content-Length is what it would cost. A chunked body declares nothing, so it is counted as it
// streams and cut when it crosses either bound.

/** The request-body bytes in flight in this process or isolate. */
export class BodyBudget {
  readonly maxBytes: number;
  #inFlight = 0;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  tryReserve(bytes: number): boolean {
    if (this.#inFlight + bytes > this.maxBytes) return false;
    this.#inFlight += bytes;
    return true;
  }

  release(bytes: number): void {
    this.#inFlight = Math.max(0, this.#inFlight - bytes);
  }
}

/** How `limitBodies` bounds request bodies: each one, and all of them in flight together. */
export interface BodyLimitsOptions {
  budget: BodyBudget;
  /** One body at most. */
  maxBodyBytes: number;
  /** The answer to a body over maxBodyBytes (413); `connection: close` is added. */
  tooLarge: (c: Context) => Response;
  /** Seconds a refused client should wait; default 1. */
  retryAfterS?: number;
}

class OverLimit extends Error {
  constructor(readonly reason: 'too_large' | 'over_budget') {
    super(reason);
  }
}

/**
 * @example
 * ```ts
 * const budget = new BodyBudget(16 * 1024 * 1024);
 * routes.post('/upload', limitBodies({ budget, maxBodyBytes: 1 << 20, tooLarge: (c) => c.json({}, 413) }), handler);
 * ```
 */
export function limitBodies({
  budget,
  maxBodyBytes,
  tooLarge,
  retryAfterS = 1,
}: BodyLimitsOptions): MiddlewareHandler {
  // The client may still be sending: the Node listener reads and discards the rest, then closes
  // (node-early-answers.ts), so say so.
  const refuse = (c: Context, reason: OverLimit['reason']): Response => {
    const res =
      reason === 'too_large'
        ? tooLarge(c)
        : c.json(
            errorBody(
              'server_busy',
              `this server is reading ${budget.maxBytes} bytes of request bodies already; retry shortly`,
            ),
            503,
            { 'retry-after': String(retryAfterS) },
          );
    res.headers.set('connection', 'close');
    return res;
  };
  return async (c, next) => {
    const declared = c.req.header('content-length');
    const chunked = c.req.header('transfer-encoding') !== undefined;
    if (declared === undefined && !chunked) return next();
    if (!chunked) {
      // Reading `c.req.raw.body` here would make @hono/node-server build a full web Request for every
      // POST; the declared size is enough, as the runtime's parser holds the body to it.
      const bytes = Number(declared);
      if (!Number.isSafeInteger(bytes) || bytes < 0) return next();
      if (bytes > maxBodyBytes) return refuse(c, 'too_large');
      if (!budget.tryReserve(bytes)) return refuse(c, 'over_budget');
      try {
        await next();
      } finally {
        budget.release(bytes);
      }
      return;
    }
    const body = c.req.raw.body;
    if (!body) return next();
    let reserved = 0;
    let cut: OverLimit | undefined;
    const reader = body.getReader();
    // Chunks are handed on, never gathered here: the handler's own read is the only copy.
    const counted = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) return controller.close();
        if (reserved + value.byteLength > maxBodyBytes) cut = new OverLimit('too_large');
        else if (!budget.tryReserve(value.byteLength)) cut = new OverLimit('over_budget');
        if (cut) {
          void reader.cancel(cut).catch(() => {});
          return controller.error(cut);
        }
        reserved += value.byteLength;
        controller.enqueue(value);
      },
      cancel: (reason) => reader.cancel(reason),
    });
    c.req.raw = new Request(c.req.raw, { body: counted, duplex: 'half' } as RequestInit);
    try {
      await next();
    } finally {
      budget.release(reserved);
    }
    // The handler's read failed on the cut: whatever it answered, the answer is the limit's.
    if (cut) c.res = refuse(c, cut.reason);
  };
}
