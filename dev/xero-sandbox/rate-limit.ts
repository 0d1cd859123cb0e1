// Xero's per-tenant rate limits: calls in flight at once, calls per rolling minute and per rolling day,
// plus the app-wide minute limit across all tenants. Windows run on the sandbox clock, so advancing it
// empties them.

export type RateLimitProblem = 'minute' | 'concurrent' | 'day' | 'appminute';

export interface RateLimits {
  /** Calls in flight per tenant (Xero: 5). `null` disables the check. */
  concurrent: number | null;
  /** Calls per tenant per rolling 60 s (Xero: 60). */
  perMinute: number | null;
  /** Calls per tenant per rolling 24 h (Xero: 5000). */
  perDay: number | null;
  /** Calls per rolling 60 s across all tenants (Xero: 10,000). */
  appPerMinute: number | null;
  /** Real (not sandbox-clock) delay added to every rate-limited API call while it holds its slot. */
  latencyMs: number;
  /** The minute's length (Xero: 60,000). Shorter only for tests and benchmarks, as the server's alike. */
  minuteMs: number;
  /** The day's length (Xero: 86,400,000). Shorter only for tests and benchmarks. */
  dayMs: number;
}

export const XERO_LIMITS: RateLimits = {
  concurrent: 5,
  perMinute: 60,
  perDay: 5000,
  appPerMinute: 10_000,
  latencyMs: 0,
  minuteMs: 60_000,
  dayMs: 86_400_000,
};

export type Admission =
  | { ok: true; release: () => void; headers: Record<string, string> }
  | { ok: false; problem: RateLimitProblem; retryAfterSeconds: number; headers: Record<string, string> };

function prune(calls: number[], now: number, windowMs: number): void {
  while (calls.length > 0 && (calls[0] as number) <= now - windowMs) calls.shift();
}

function retryAfter(calls: number[], now: number, windowMs: number): number {
  const oldest = calls[0] ?? now;
  return Math.max(1, Math.ceil((oldest + windowMs - now) / 1000));
}

export class RateLimiter {
  limits: RateLimits;
  readonly #inFlight = new Map<string, number>();
  readonly #minute = new Map<string, number[]>();
  readonly #day = new Map<string, number[]>();
  readonly #app: number[] = [];

  constructor(limits: RateLimits) {
    this.limits = { ...limits };
  }

  reset(limits: RateLimits): void {
    this.limits = { ...limits };
    this.#inFlight.clear();
    this.#minute.clear();
    this.#day.clear();
    this.#app.length = 0;
  }

  inFlight(tenantId: string): number {
    return this.#inFlight.get(tenantId) ?? 0;
  }

  /** Admits a call (counting it) or says which limit it hit. Rejected calls are not counted. */
  acquire(tenantId: string, now: number): Admission {
    const { concurrent, perMinute, perDay, appPerMinute, minuteMs: MINUTE_MS, dayMs: DAY_MS } = this.limits;
    const minute = this.#calls(this.#minute, tenantId);
    const day = this.#calls(this.#day, tenantId);
    prune(minute, now, MINUTE_MS);
    prune(day, now, DAY_MS);
    prune(this.#app, now, MINUTE_MS);
    const inFlight = this.inFlight(tenantId);

    const remaining = (limit: number | null, used: number) =>
      limit === null ? 'unlimited' : String(Math.max(0, limit - used));
    const headers = (extra: number) => ({
      'x-daylimit-remaining': remaining(perDay, day.length + extra),
      'x-minlimit-remaining': remaining(perMinute, minute.length + extra),
      'x-appminlimit-remaining': remaining(appPerMinute, this.#app.length + extra),
    });
    // Retry-After only for the minute and day limits, as Xero's API limits guide says; a concurrent or
    // app-minute 429 carries the problem alone.
    const reject = (problem: RateLimitProblem, retryAfterSeconds: number): Admission => ({
      ok: false,
      problem,
      retryAfterSeconds,
      headers: {
        ...headers(0),
        ...(problem === 'minute' || problem === 'day' ? { 'retry-after': String(retryAfterSeconds) } : {}),
        'x-rate-limit-problem': problem,
      },
    });

    if (concurrent !== null && inFlight >= concurrent) return reject('concurrent', 1);
    if (perMinute !== null && minute.length >= perMinute)
      return reject('minute', retryAfter(minute, now, MINUTE_MS));
    if (perDay !== null && day.length >= perDay) return reject('day', retryAfter(day, now, DAY_MS));
    if (appPerMinute !== null && this.#app.length >= appPerMinute) {
      return reject('appminute', retryAfter(this.#app, now, MINUTE_MS));
    }

    minute.push(now);
    day.push(now);
    this.#app.push(now);
    this.#inFlight.set(tenantId, inFlight + 1);
    let released = false;
    return {
      ok: true,
      headers: headers(0),
      release: () => {
        if (released) return;
        released = true;
        const current = this.inFlight(tenantId);
        if (current <= 1) this.#inFlight.delete(tenantId);
        else this.#inFlight.set(tenantId, current - 1);
      },
    };
  }

  #calls(map: Map<string, number[]>, tenantId: string): number[] {
    let calls = map.get(tenantId);
    if (!calls) {
      calls = [];
      map.set(tenantId, calls);
    }
    return calls;
  }
}
