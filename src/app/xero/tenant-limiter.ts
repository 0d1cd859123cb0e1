// Xero's per-tenant limits, kept in this process: at most 5 calls in flight and 60 in any minute.
// (Several replicas each keep their own count; Xero's 429 with Retry-After covers the rest.)

export interface TenantLimits {
  concurrent: number;
  perMinute: number;
}

export const XERO_LIMITS: TenantLimits = { concurrent: 5, perMinute: 60 };

export class TenantLimiter {
  readonly #inFlight = new Map<string, number>();
  readonly #recent = new Map<string, number[]>();

  constructor(
    private readonly limits: TenantLimits = XERO_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  /** A release function, or how long to wait before the tenant has room again. */
  tryAcquire(tenantId: string): { release: () => void } | { retryInMs: number } {
    const now = this.now();
    const recent = (this.#recent.get(tenantId) ?? []).filter((t) => t > now - 60_000);
    this.#recent.set(tenantId, recent);
    const inFlight = this.#inFlight.get(tenantId) ?? 0;
    if (inFlight >= this.limits.concurrent) return { retryInMs: 100 };
    if (recent.length >= this.limits.perMinute) return { retryInMs: (recent[0] ?? now) + 60_000 - now };
    recent.push(now);
    this.#inFlight.set(tenantId, inFlight + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.#inFlight.set(tenantId, (this.#inFlight.get(tenantId) ?? 1) - 1);
      },
    };
  }
}
