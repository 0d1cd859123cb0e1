import type { DatabaseHandle } from '../db/handle.js';
import { DatabaseUnavailableError, withPoisonRetry } from '../db/poison-retry.js';
import type { Database } from '../db/types.js';
import type { ErrorTracker } from '../util/error-tracking.js';
import type { Logger } from '../util/log.js';
import { withLogContext } from '../util/log-context.js';
import type { TickOutcome } from '../util/telemetry.js';
import { noTelemetry, type Telemetry } from '../util/telemetry.js';
import type { TickMonitor } from './tick-monitor.js';

/**
 * One run of a tick, as the runner hands it to the tick. `owner` names this run alone: runs overlap
 * across processes, isolates and cron invocations, so a lease written under it is never mistaken for
 * another run's, and a crashed run's leases come back only when they expire.
 */
export interface TickRun {
  /** `<instance>:<uuid>`, fresh for every run (its retry after a failover keeps it). */
  owner: string;
  /** The run id on its log lines: the first 8 characters of the owner's uuid. */
  runId: string;
}

export type TickFn<T> = (db: Database, run: TickRun) => Promise<T>;

/** Where a run goes: the process's handle and monitor, or on Workers the invocation's. */
export interface TickTarget {
  database: DatabaseHandle;
  /** Records each run (tick health, Sentry check-ins, heartbeats); never delays or fails it. */
  monitor?: TickMonitor;
}

export type TickRunner = <T>(name: string, fn: TickFn<T>, target: TickTarget) => Promise<T | undefined>;

export interface TickRunnerOptions {
  /** The replica (or, on Workers, the schedule) a run's owner starts with; `app` when unset. */
  instanceId?: string;
  telemetry?: Telemetry;
  /** Sees each successful run's result (the app turns token-refresh counts into metrics). */
  onResult?: (name: string, result: unknown) => void;
}

/**
 * runTick(name, fn, target): runs a scheduled tick. A pool-poisoning error (the failover case) disposes the
 * pool and runs the tick exactly once more on a fresh one; a second failure, or any other error,
 * propagates after being logged as `tick crashed` (a warning, unreported, when it is the failover). The same tick never runs twice at
 * once in this process or isolate: a call while it runs is skipped (undefined).
 * Each run is a span (its queries nest under it), is counted by outcome (ok, retried, crashed,
 * skipped) with its duration, and every line it logs carries the tick's name and run id.
 */
export function createTickRunner(
  log: Logger,
  errors: ErrorTracker,
  options: TickRunnerOptions = {},
): TickRunner {
  const telemetry = options.telemetry ?? noTelemetry;
  const running = new Set<string>();
  return async (name, fn, { database, monitor }) => {
    if (running.has(name)) {
      log.debug('tick skipped: still running', { tick: name });
      telemetry.metrics.tick(name, 'skipped', 0);
      return undefined;
    }
    running.add(name);
    const monitored = monitor?.start(name);
    const runUuid = crypto.randomUUID();
    const run: TickRun = { owner: `${options.instanceId ?? 'app'}:${runUuid}`, runId: runUuid.slice(0, 8) };
    const { runId } = run;
    const tickLog = log.child({ tick: name, run_id: runId });
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    let attempts = 0;
    const attempt = (db: Database) => {
      attempts += 1;
      return fn(db, run);
    };
    try {
      return await withLogContext({ tick: name, run_id: runId }, () =>
        telemetry.tracing.active(
          `tick ${name}`,
          { root: true, attributes: { 'tick.name': name, 'tick.run_id': runId } },
          async (span) => {
            try {
              const result = await withPoisonRetry(database, attempt, {
                retry: true,
                source: 'tick',
                name,
                log: tickLog,
              });
              const outcome: TickOutcome = attempts > 1 ? 'retried' : 'ok';
              span.setAttributes({ 'tick.outcome': outcome });
              telemetry.metrics.tick(name, outcome, seconds());
              options.onResult?.(name, result);
              monitored?.finish();
              tickLog.debug('tick done', { ms: Math.round(seconds() * 1000), outcome });
              return result;
            } catch (err) {
              span.setAttributes({ 'tick.outcome': 'crashed' });
              throw err;
            }
          },
        ),
      );
    } catch (err) {
      telemetry.metrics.tick(name, 'crashed', seconds());
      if (err instanceof DatabaseUnavailableError) {
        // The database failed over under the tick twice (the retry too): routine, not a bug. A warning,
        // not reported to error tracking; the tick runs again at its next interval.
        tickLog.warn('tick crashed', { ms: Math.round(seconds() * 1000), database_unavailable: err.reason });
      } else {
        tickLog.error('tick crashed', { ms: Math.round(seconds() * 1000), err });
        errors.capture(err, { tick: name, run_id: runId });
      }
      monitored?.finish(err);
      throw err;
    } finally {
      running.delete(name);
    }
  };
}
