import type { DatabaseHandle } from '../db/handle.js';
import type { ErrorTracker, MonitorConfig } from '../util/error-tracking.js';
import type { Logger } from '../util/log.js';
import { withTimeout } from '../util/timeout.js';
import { ping } from './heartbeats.js';
import { recordTickFinish, recordTickStart, tickErrorCode } from './tick-health-store.js';

export interface TickMonitorOptions {
  /** Where runs are recorded (the tick's own handle: its current pool, fresh after a dispose). */
  database: DatabaseHandle;
  /** This replica (ProcessOptions.instanceId, else the host name) or, on Workers, one name for every invocation. */
  instanceId: string;
  log: Logger;
  errors: ErrorTracker;
  /** Tick name -> heartbeat ping URL. */
  heartbeats: ReadonlyMap<string, string>;
  /** The Sentry monitor's schedule and margins for a tick, sent with every check-in. */
  monitorConfig(tick: string): MonitorConfig;
  /** Bounds each record; a database too slow to take it leaves the tick's health stale, not the tick. */
  timeoutMs: number;
  /** Bounds each heartbeat ping (HEARTBEAT_TIMEOUT_MS, 5 s, by default). */
  heartbeatTimeoutMs?: number;
}

export interface TickRun {
  /** The run ended: `err` undefined for success. Returns at once; delivery goes on in the background. */
  finish(err?: unknown): void;
}

/**
 * Everything a tick run reports about itself, none of which may delay or fail it: the tick health
 * row (the database), the Sentry Crons check-ins and the heartbeat pings. Each run's end is sent
 * after its start settled, so a receiver never sees a run end before it began. idle() resolves once
 * everything in flight has settled (Workers hand it to waitUntil; shutdown awaits it).
 */
export class TickMonitor {
  readonly #pending = new Set<Promise<unknown>>();

  constructor(private readonly options: TickMonitorOptions) {}

  start(tick: string): TickRun {
    const { database, instanceId, log, errors, heartbeats } = this.options;
    const began = performance.now();
    const record = (what: string, work: () => Promise<void>) =>
      withTimeout(work(), this.options.timeoutMs, `recording tick ${what}`).catch((err: unknown) =>
        log.warn('tick health not recorded', { tick, what, reason: tickErrorCode(err) }),
      );
    const started = record('start', () => recordTickStart(database.pool, tick, instanceId));
    this.#track(started);
    const monitorConfig = this.options.monitorConfig(tick);
    const checkInId = this.#checkIn(() =>
      errors.checkIn?.({ monitorSlug: tick, status: 'in_progress' }, monitorConfig),
    );
    const heartbeat = heartbeats.get(tick);
    const pinged = heartbeat
      ? ping(heartbeat, 'start', tick, { log, timeoutMs: this.options.heartbeatTimeoutMs })
      : undefined;
    if (pinged) this.#track(pinged);
    let finished = false;
    return {
      finish: (err) => {
        if (finished) return;
        finished = true;
        const code = err === undefined ? undefined : tickErrorCode(err);
        this.#track(
          started.then(() => record('finish', () => recordTickFinish(database.pool, tick, instanceId, code))),
        );
        this.#checkIn(() =>
          errors.checkIn?.(
            {
              monitorSlug: tick,
              status: code === undefined ? 'ok' : 'error',
              ...(checkInId ? { checkInId } : {}),
              duration: (performance.now() - began) / 1000,
            },
            monitorConfig,
          ),
        );
        if (heartbeat && pinged) {
          this.#track(
            pinged.then(() =>
              ping(heartbeat, code === undefined ? 'success' : 'fail', tick, {
                log,
                timeoutMs: this.options.heartbeatTimeoutMs,
              }),
            ),
          );
        }
      },
    };
  }

  /** Resolves when every record and ping in flight has settled (each is bounded by its timeout). */
  async idle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  /** Keeps `work` until it settles: idle() (awaited in waitUntil on Workers) waits for it. */
  #track(work: Promise<unknown>): void {
    this.#pending.add(work);
    const forget = () => this.#pending.delete(work);
    work.then(forget, forget);
  }

  // The SDK queues the envelope and never throws by contract; a bug in it must not reach the tick.
  #checkIn(send: () => string | undefined): string | undefined {
    try {
      return send();
    } catch (err) {
      this.options.log.warn('sentry check-in failed', { reason: tickErrorCode(err) });
      return undefined;
    }
  }
}

/** Sentry monitor settings from the tick's interval and K: a run missed for K intervals is late. */
export function intervalMonitorConfig(
  intervalMs: number,
  intervals: number,
  failures: number,
  schedule?: MonitorConfig['schedule'],
): MonitorConfig {
  const minutes = Math.max(1, Math.round(intervalMs / 60_000));
  return {
    // Sentry's interval schedules count whole minutes at the finest.
    schedule: schedule ?? { type: 'interval', value: minutes, unit: 'minute' },
    checkinMargin: Math.max(1, Math.ceil((intervalMs * Math.max(1, intervals - 1)) / 60_000)),
    maxRuntime: Math.max(1, Math.ceil((intervalMs * intervals) / 60_000)),
    failureIssueThreshold: failures,
  };
}
