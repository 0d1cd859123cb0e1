import type { DatabaseHandle } from '../db/handle.js';
import { withPoisonRetry } from '../db/poison-retry.js';
import type { Database } from '../db/types.js';
import type { ErrorTracker } from '../error-tracking.js';
import type { Logger } from '../log.js';

export type TickFn<T> = (db: Database) => Promise<T>;

export type TickRunner = <T>(name: string, fn: TickFn<T>) => Promise<T | undefined>;

/**
 * runTick(name, fn): runs a scheduled tick. A pool-poisoning error (the failover case) disposes the
 * pool and runs the tick exactly once more on a fresh one; a second failure, or any other error,
 * propagates after being logged as `tick crashed` and reported. The same tick never runs twice at
 * once in this process: a call while it runs is skipped (undefined).
 */
export function createTickRunner(database: DatabaseHandle, log: Logger, errors: ErrorTracker): TickRunner {
  const running = new Set<string>();
  return async (name, fn) => {
    if (running.has(name)) {
      log.debug('tick skipped: still running', { tick: name });
      return undefined;
    }
    running.add(name);
    const runId = crypto.randomUUID().slice(0, 8);
    const tickLog = log.child({ tick: name, run_id: runId });
    const started = performance.now();
    try {
      const result = await withPoisonRetry(database, fn, {
        retry: true,
        source: `tick ${name}`,
        log: tickLog,
      });
      tickLog.debug('tick done', { ms: Math.round(performance.now() - started) });
      return result;
    } catch (err) {
      tickLog.error('tick crashed', { ms: Math.round(performance.now() - started), err });
      errors.capture(err, { tick: name, run_id: runId });
      throw err;
    } finally {
      running.delete(name);
    }
  };
}
