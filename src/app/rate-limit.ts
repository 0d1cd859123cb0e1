// A per-key request rate: GCRA (the generic cell rate algorithm, a token bucket kept as one number per
// key, its "theoretical arrival time"). State lives in this process or isolate only: N replicas allow
// N times the rate, and on Workers, where a key's requests spread over many isolates, it is best
// effort (docs/api.md, "Rate limits"). The map is bounded: the least recently seen key (to within a
// second) is dropped first, which at worst gives that key a fresh burst.

import type { AppEnv } from '@honest-health/platform';
import { createMiddleware } from 'hono/factory';
import type { AuthEnv } from './auth.js';
import { errorBody } from './errors.js';

export interface RateLimitConfig {
  /** Sustained requests per minute per key. */
  perMinute: number;
  /** Requests a key may send at once after being idle. */
  burst: number;
}

export type RateDecision = { allowed: true } | { allowed: false; retryAfterMs: number };

const ALLOWED: RateDecision = Object.freeze({ allowed: true });

/** A key's state: its theoretical arrival time, and when it last moved to the back of the order (ms). */
interface Cell {
  tat: number;
  movedAt: number;
}

// A busy key moves to the back of the map's order at most this often: moved on every hit, each request
// would delete and re-insert its entry, and V8 would rebuild the map's table every few requests.
const REORDER_MS = 1000;

export class KeyRateLimiter {
  readonly #intervalMs: number;
  readonly #toleranceMs: number;
  readonly #maxKeys: number;
  // Map order is last-seen order, to within REORDER_MS: the first key is the one to drop.
  #cells = new Map<string, Cell>();

  constructor(config: RateLimitConfig, maxKeys = 100_000) {
    this.#intervalMs = 60_000 / config.perMinute;
    this.#toleranceMs = this.#intervalMs * config.burst;
    this.#maxKeys = maxKeys;
  }

  take(key: string, now = Date.now()): RateDecision {
    const cell = this.#cells.get(key);
    const tat = Math.max(cell?.tat ?? now, now) + this.#intervalMs;
    if (tat - now > this.#toleranceMs) {
      return { allowed: false, retryAfterMs: tat - now - this.#toleranceMs };
    }
    if (cell) {
      cell.tat = tat;
      if (now - cell.movedAt >= REORDER_MS) {
        this.#cells.delete(key);
        this.#cells.set(key, cell);
        cell.movedAt = now;
      }
      return ALLOWED;
    }
    this.#cells.set(key, { tat, movedAt: now });
    if (this.#cells.size > this.#maxKeys) {
      const oldest = this.#cells.keys().next().value;
      if (oldest !== undefined) this.#cells.delete(oldest);
    }
    return ALLOWED;
  }

  get size(): number {
    return this.#cells.size;
  }
}

/**
 * 429 with Retry-After (RFC 9110 section 10.2.3) past a key's rate. The IETF RateLimit and
 * RateLimit-Policy fields are not sent: draft-ietf-httpapi-ratelimit-headers is still an
 * Internet-Draft whose field names and syntax changed between revisions (-06 had RateLimit-Limit,
 * -Remaining and -Reset; -07 replaced them with structured RateLimit and RateLimit-Policy).
 */
export function limitKeyRate(limiter: KeyRateLimiter, config: RateLimitConfig) {
  return createMiddleware<AuthEnv>(async (c, next) => {
    const decision = limiter.take(c.get('apiKeyId'));
    if (!decision.allowed) {
      return c.json(
        errorBody(
          'rate_limited',
          `this API key is over its rate limit of ${config.perMinute} requests a minute (bursts of ${config.burst})`,
          [{ path: 'Authorization', message: `at most ${config.perMinute} requests a minute per key` }],
        ),
        429,
        { 'retry-after': String(Math.max(1, Math.ceil(decision.retryAfterMs / 1000))) },
      );
    }
    await next();
  });
}

/**
 * The same rate per client address, for what answers strangers (the connect flow's pages): checked
 * before anything else, so a flood costs the database nothing past the allowance. The address is
 * the platform's `clientIp` (CLIENT_IP_HEADER behind a trusted proxy, else the socket's peer);
 * without one, every such request shares one allowance.
 */
export function limitClientRate(limiter: KeyRateLimiter, config: RateLimitConfig) {
  return createMiddleware<AppEnv>(async (c, next) => {
    const decision = limiter.take(c.var.clientIp ?? 'unknown');
    if (!decision.allowed) {
      return c.json(
        errorBody(
          'rate_limited',
          `this address is over its rate limit of ${config.perMinute} requests a minute (bursts of ${config.burst}) on this endpoint`,
          [{ path: 'client', message: `at most ${config.perMinute} requests a minute per address` }],
        ),
        429,
        {
          'retry-after': String(Math.max(1, Math.ceil(decision.retryAfterMs / 1000))),
          'cache-control': 'no-store',
        },
      );
    }
    await next();
  });
}
