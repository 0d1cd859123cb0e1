// The shared Xero budget (docs/xero-budget.md): Xero's limits, and the window lengths they are counted
// over. The counts themselves live in Postgres, on the rows the claim locks (xero_connections,
// xero_app_limits), so every replica and every Workers isolate spends the same budget.

export interface XeroBudget {
  /** Calls in flight per tenant (Xero: 5). A slot is held from the claim until the batch settles. */
  concurrent: number;
  /** Calls per tenant per rolling minute (Xero: 60). */
  perMinute: number;
  /** Calls per tenant per rolling day (Xero: 5,000). */
  perDay: number;
  /** Calls per rolling minute across every tenant of the app (Xero: 10,000). */
  appPerMinute: number;
  /** The minute's length: 60,000 in production; shorter only through XERO_BUDGET_TEST_MINUTE_MS. */
  minuteMs: number;
  /** The day's length: 86,400,000 in production; shorter only through XERO_BUDGET_TEST_DAY_MS. */
  dayMs: number;
  /**
   * A call is counted from its claim, but Xero counts it when it arrives. So a call must start within
   * this long of its claim (the dispatcher defers it otherwise), and a call stays counted for this much
   * longer than the window: Xero's window never holds more than we counted.
   */
  sendWithinMs: number;
}

/** Xero's published limits (developer.xero.com, API limits / FAQ "What are the Xero API rate limits?"). */
export const XERO_BUDGET: XeroBudget = {
  concurrent: 5,
  perMinute: 60,
  perDay: 5000,
  appPerMinute: 10_000,
  minuteMs: 60_000,
  dayMs: 86_400_000,
  sendWithinMs: 2000,
};

/**
 * The budget over shortened windows (tests and benchmarks only). Every process and isolate that shares
 * a budget must build it here from the same settings: one that gives its calls longer to start than
 * another counts them for longer, and the other then undercounts the calls the first sends late.
 */
export function shortenedXeroBudget(minuteMs: number, dayMs: number, sendWithinMs?: number): XeroBudget {
  const budget = XERO_BUDGET;
  if (minuteMs === budget.minuteMs && dayMs === budget.dayMs && sendWithinMs === undefined) return budget;
  // Unset: a fifteenth of a shortened minute, at most Xero's 2 s.
  return {
    ...budget,
    minuteMs,
    dayMs,
    sendWithinMs: sendWithinMs ?? Math.min(budget.sendWithinMs, Math.round(minuteMs / 15)),
  };
}

/** How long a call stays counted: its window plus the longest a claimed call may wait to be sent. */
export const countedMs = (budget: XeroBudget, windowMs: number) => windowMs + budget.sendWithinMs;

/**
 * A window counted in fixed sub-windows (docs/xero-budget.md, "Bounded state"): `n` counters of `subMs`
 * each, the newest being the current one. They reach back at least `countedMs` (window + sendWithinMs),
 * so a call stays counted for its window, its time to start and at most one sub-window more: Xero's
 * rolling window never holds more than the counters do, and a steady backlog gets at least
 * window ÷ (window + sendWithinMs + subMs) of the limit.
 */
export interface SubWindows {
  subMs: number;
  n: number;
}

/** The minutes in 60 sub-windows (1 s in production), the day in 24 (1 h). */
export function subWindows(budget: XeroBudget, window: 'minute' | 'day'): SubWindows {
  const windowMs = window === 'minute' ? budget.minuteMs : budget.dayMs;
  const subMs = Math.max(1, Math.floor(windowMs / (window === 'minute' ? 60 : 24)));
  return { subMs, n: Math.ceil(countedMs(budget, windowMs) / subMs) + 1 };
}
