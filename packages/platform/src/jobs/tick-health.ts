import type { TickHealthRow, TickHealthSnapshot } from './tick-health-store.js';

// Turns the tick health table into a verdict per tick. Pure: the clock is the database's.

export interface MonitoredTick {
  name: string;
  intervalMs: number;
}

export interface TickHealthPolicy {
  /** K: a tick must have succeeded within K of its intervals (TICK_HEALTH_INTERVALS, default 3). */
  intervals: number;
  /** Consecutive failures on one instance that count as "failing run after run" (default 2). */
  failures: number;
  /**
   * When this process started (Node, Bun): a tick with no record yet is `pending` until K intervals
   * after it. Workers have no start, so there a tick that never ran is overdue at once.
   */
  startedAtMs?: number;
}

export type TickStatus = 'ok' | 'pending' | 'failing' | 'overdue';

export interface InstanceHealth {
  instance: string;
  last_started_at: string | null;
  last_success_at: string | null;
  last_failure_at: string | null;
  consecutive_failures: number;
  last_error_code: string | null;
}

export interface TickVerdict {
  status: TickStatus;
  interval_s: number;
  last_success_at: string | null;
  last_failure_at: string | null;
  /** The worst of the instances heard from within K intervals. */
  consecutive_failures: number;
  last_error_code: string | null;
  /** No run started, anywhere, within K intervals (or no success within K intervals). */
  overdue: boolean;
  /** Instances failing run after run: where to look. */
  failing_instances: string[];
  instances: InstanceHealth[];
}

export interface TickHealthReport {
  status: 'ok' | 'failing';
  ticks: Record<string, TickVerdict>;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const latest = (values: (number | null)[]) =>
  values.reduce<number | null>((a, b) => (b !== null && (a === null || b > a) ? b : a), null);

export function evaluateTickHealth(
  snapshot: TickHealthSnapshot,
  ticks: readonly MonitoredTick[],
  policy: TickHealthPolicy,
): TickHealthReport {
  const verdicts: Record<string, TickVerdict> = {};
  for (const tick of ticks) {
    verdicts[tick.name] = verdictFor(
      snapshot.nowMs,
      tick,
      snapshot.rows.filter((r) => r.tick === tick.name),
      policy,
    );
  }
  const healthy = Object.values(verdicts).every((v) => v.status === 'ok' || v.status === 'pending');
  return { status: healthy ? 'ok' : 'failing', ticks: verdicts };
}

function verdictFor(
  nowMs: number,
  tick: MonitoredTick,
  rows: TickHealthRow[],
  policy: TickHealthPolicy,
): TickVerdict {
  const window = tick.intervalMs * policy.intervals;
  const recent = (ms: number | null) => ms !== null && nowMs - ms <= window;
  // An instance that stopped writing (scaled down, replaced) no longer speaks for the tick.
  const live = rows.filter((r) => recent(r.startedMs) || recent(r.finishedMs));
  const failing = live.filter((r) => r.consecutiveFailures >= policy.failures);
  const worst = live.reduce<TickHealthRow | undefined>(
    (w, r) => (r.consecutiveFailures > (w?.consecutiveFailures ?? -1) ? r : w),
    undefined,
  );
  const lastSuccess = latest(rows.map((r) => r.successMs));
  const lastFailure = latest(rows.map((r) => r.failureMs));
  const lastFailed = rows.find((r) => r.failureMs !== null && r.failureMs === lastFailure);
  const lastStart = latest(rows.map((r) => latest([r.startedMs, r.finishedMs])));
  const young = policy.startedAtMs !== undefined && nowMs - policy.startedAtMs <= window;
  const overdue = !young && (!recent(lastStart) || !recent(lastSuccess));
  let status: TickStatus = 'ok';
  if (failing.length > 0) status = 'failing';
  else if (overdue) status = 'overdue';
  else if (lastSuccess === null) status = 'pending';
  return {
    status,
    interval_s: tick.intervalMs / 1000,
    last_success_at: iso(lastSuccess),
    last_failure_at: iso(lastFailure),
    consecutive_failures: worst?.consecutiveFailures ?? 0,
    last_error_code: (failing[0] ?? lastFailed)?.lastErrorCode ?? null,
    overdue,
    failing_instances: failing.map((r) => r.instanceId),
    instances: rows.map((r) => ({
      instance: r.instanceId,
      last_started_at: iso(r.startedMs),
      last_success_at: iso(r.successMs),
      last_failure_at: iso(r.failureMs),
      consecutive_failures: r.consecutiveFailures,
      last_error_code: r.lastErrorCode,
    })),
  };
}
