// Fault injection: the next N matching calls fail in a chosen way. Faults fire before anything else
// (authentication, rate limits, idempotency) and are consumed in the order they were added.
import type { MiddlewareHandler } from 'hono';
import { gatewayTimeout, serverError, serviceUnavailable, tooManyRequests } from './errors.js';
import { uuid } from './ids.js';
import type { RateLimitProblem } from './rate-limit.js';
import type { SandboxState } from './state.js';
import { type RouteTarget, routeTarget } from './urls.js';

export const FAULT_TARGETS = [
  'invoices',
  'token',
  'connections',
  'authorize',
  'revocation',
  'api',
  'any',
] as const;
export const FAULT_KINDS = ['500', '503', '429', 'hang', 'drop'] as const;
export type FaultTarget = (typeof FAULT_TARGETS)[number];
export type FaultKind = (typeof FAULT_KINDS)[number];

/** How long a 'hang' holds the response by default: longer than any sane client timeout. */
export const DEFAULT_HANG_MS = 10 * 60_000;

/**
 * A response carrying this header must never reach the client: server.ts destroys the socket instead,
 * so the client sees a network error after the side effect happened. In-process callers (app.fetch,
 * app.request) see the header and can treat the response as lost; see in-process.ts.
 */
export const DROP_HEADER = 'x-xero-sandbox-drop';

export interface FaultSpec {
  target: FaultTarget;
  kind: FaultKind;
  /** How many matching calls fail (default 1). */
  count?: number;
  /** For '429': the Retry-After to send (default 1, so retrying clients stay fast in tests); sent only for
   * the minute and day problems, as Xero does. */
  retryAfterSeconds?: number;
  /** For '429': the X-Rate-Limit-Problem to send (default 'minute'). */
  problem?: RateLimitProblem;
  /** For 'hang': how long to hold the request before answering 504 (default 10 minutes). */
  hangMs?: number;
}

export interface Fault {
  id: string;
  target: FaultTarget;
  kind: FaultKind;
  remaining: number;
  retryAfterSeconds: number;
  problem: RateLimitProblem;
  hangMs: number;
}

function matches(fault: Fault, target: RouteTarget): boolean {
  if (fault.target === 'any') return true;
  if (fault.target === 'api') return target === 'api' || target === 'invoices';
  return fault.target === target;
}

export class FaultQueue {
  readonly #faults: Fault[] = [];

  add(spec: FaultSpec): Fault {
    const fault: Fault = {
      id: uuid(),
      target: spec.target,
      kind: spec.kind,
      remaining: spec.count ?? 1,
      retryAfterSeconds: spec.retryAfterSeconds ?? 1,
      problem: spec.problem ?? 'minute',
      hangMs: spec.hangMs ?? DEFAULT_HANG_MS,
    };
    if (!(fault.remaining >= 1)) throw new RangeError('count must be >= 1');
    this.#faults.push(fault);
    return fault;
  }

  /** The first pending fault matching `target`, not consumed. */
  peek(target: RouteTarget): Fault | undefined {
    return this.#faults.find((fault) => matches(fault, target));
  }

  /** Consumes one use of the first pending fault matching `target`. */
  take(target: RouteTarget): Fault | undefined {
    const index = this.#faults.findIndex((fault) => matches(fault, target));
    const fault = this.#faults[index];
    if (!fault) return undefined;
    fault.remaining -= 1;
    if (fault.remaining <= 0) this.#faults.splice(index, 1);
    return fault;
  }

  list(): Fault[] {
    return this.#faults.map((fault) => ({ ...fault }));
  }

  clear(): void {
    this.#faults.length = 0;
  }
}

export function isDropped(response: Response): boolean {
  return response.headers.has(DROP_HEADER);
}

function markDropped(response: Response): Response {
  const headers = new Headers(response.headers);
  headers.set(DROP_HEADER, '1');
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

/** Resolves after `ms`, or as soon as any signal aborts (client gone, sandbox closing). */
function hold(ms: number, signals: AbortSignal[]): Promise<void> {
  const signal = AbortSignal.any(signals);
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * A `500` for an invoice create is Xero failing *inside* the request, after authentication, rate
 * limits and the Idempotency-Key: invoices.ts takes it there, so the error is cached under the key
 * ("If an idempotent request errors out internally, the error will be cached and returned when the
 * request is re-run", Xero's "Idempotent requests" guide).
 */
export function isInternalFault(fault: Fault | undefined, method: string, target: RouteTarget): boolean {
  return fault?.kind === '500' && target === 'invoices' && (method === 'PUT' || method === 'POST');
}

export function faultMiddleware(state: SandboxState): MiddlewareHandler {
  return async (c, next) => {
    const target = routeTarget(c.req.path);
    if (target !== null && isInternalFault(state.faults.peek(target), c.req.method, target)) return next();
    const fault = target === null ? undefined : state.faults.take(target);
    if (!fault) return next();
    state.stats.faultsFired[fault.kind] += 1;
    switch (fault.kind) {
      case '500':
        return serverError();
      case '503':
        return serviceUnavailable();
      case '429':
        return tooManyRequests(fault.problem, {
          ...(fault.problem === 'minute' || fault.problem === 'day'
            ? { 'retry-after': String(fault.retryAfterSeconds) }
            : {}),
          'x-rate-limit-problem': fault.problem,
        });
      case 'hang':
        await hold(fault.hangMs, [c.req.raw.signal, state.shutdownSignal]);
        return gatewayTimeout();
      case 'drop':
        await next();
        c.res = markDropped(c.res);
        return;
    }
  };
}
