// A per-key request rate: GCRA (the generic cell rate algorithm, a token bucket kept as one number per
// key, its "theoretical arrival time"). State lives in this process or isolate only: N replicas allow
// N times the rate, and on Workers, where a key's requests spread over many isolates, it is best
// effort (docs/api.md, "Rate limits"). The map is bounded: the least recently seen key is dropped
// first, which at worst gives that key a fresh burst.

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

export class KeyRateLimiter {
  readonly #intervalMs: number;
  readonly #toleranceMs: number;
  readonly #maxKeys: number;
  // Key -> theoretical arrival time (ms). Map order is last-seen order: every hit re-inserts its key.
  #tat = new Map<string, number>();

  constructor(config: RateLimitConfig, maxKeys = 100_000) {
    this.#intervalMs = 60_000 / config.perMinute;
    this.#toleranceMs = this.#intervalMs * config.burst;
    this.#maxKeys = maxKeys;
  }

  take(key: string, now = Date.now()): RateDecision {
    const tat = Math.max(this.#tat.get(key) ?? now, now) + this.#intervalMs;
    if (tat - now > this.#toleranceMs) {
      return { allowed: false, retryAfterMs: tat - now - this.#toleranceMs };
    }
    this.#tat.delete(key);
    this.#tat.set(key, tat);
    if (this.#tat.size > this.#maxKeys) {
      const oldest = this.#tat.keys().next().value;
      if (oldest !== undefined) this.#tat.delete(oldest);
    }
    return ALLOWED;
  }

  get size(): number {
    return this.#tat.size;
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
