// Xero's per-tenant limits, kept in this process: at most 5 calls in flight and 60 in any minute.
// (Several replicas each keep their own count; what Xero's answers say of the remaining budgets is
// stored in Postgres for every replica's next claim, see docs/xero.md.)
// The push tick asks once per push, so asking is synchronous and, beyond recording the start, allocates
// nothing.

export interface TenantLimits {
  concurrent: number;
  perMinute: number;
}

export const XERO_LIMITS: TenantLimits = { concurrent: 5, perMinute: 60 };

const WINDOW_MS = 60_000;
/** How soon to ask again when the tenant's calls in flight are what is full: one of them will finish. */
const IN_FLIGHT_RETRY_MS = 100;

interface TenantState {
  inFlight: number;
  /** Start times of the calls in the last minute, oldest first, from index `head` on. */
  starts: number[];
  head: number;
}

export class TenantLimiter {
  readonly #tenants = new Map<string, TenantState>();

  constructor(
    private readonly limits: TenantLimits = XERO_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * 0 when a slot was taken (call `release(tenantId)` once the call is over), otherwise how many
   * milliseconds to wait before the tenant has room: IN_FLIGHT_RETRY_MS when its calls in flight are
   * full, or until the oldest call of the last minute leaves the window when its minute is used up.
   */
  tryAcquire(tenantId: string): number {
    const now = this.now();
    let state = this.#tenants.get(tenantId);
    if (state === undefined) {
      state = { inFlight: 0, starts: [], head: 0 };
      this.#tenants.set(tenantId, state);
    }
    const inWindow = prune(state, now);
    if (state.inFlight >= this.limits.concurrent) return IN_FLIGHT_RETRY_MS;
    if (inWindow >= this.limits.perMinute)
      return Math.max(1, (state.starts[state.head] ?? now) + WINDOW_MS - now);
    state.starts.push(now);
    state.inFlight += 1;
    return 0;
  }

  /** Gives back a slot taken by tryAcquire; its start still counts towards the minute. */
  release(tenantId: string): void {
    const state = this.#tenants.get(tenantId);
    if (state !== undefined && state.inFlight > 0) state.inFlight -= 1;
  }

  /**
   * Tenants whose minute is used up, so a claim can leave their pushes for later instead of claiming
   * them only to put them back. Forgets idle tenants on the way, which keeps the map to the tenants
   * of the last minute.
   */
  exhausted(): string[] {
    const now = this.now();
    const out: string[] = [];
    for (const [tenantId, state] of this.#tenants) {
      const inWindow = prune(state, now);
      if (inWindow >= this.limits.perMinute) out.push(tenantId);
      else if (inWindow === 0 && state.inFlight === 0) this.#tenants.delete(tenantId);
    }
    return out;
  }
}

/** Drops starts older than a minute; returns how many are left. */
function prune(state: TenantState, now: number): number {
  const { starts } = state;
  let head = state.head;
  while (head < starts.length && (starts[head] as number) <= now - WINDOW_MS) head += 1;
  // Compact now and then rather than shifting on every call.
  if (head > 64 && head * 2 > starts.length) {
    starts.splice(0, head);
    head = 0;
  }
  state.head = head;
  return starts.length - head;
}
