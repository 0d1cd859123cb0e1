import type { Logger } from '../util/log.js';
import { describeWork, type PoisonedWork } from './disposal.js';
import type { DatabaseHandle } from './handle.js';
import { poisonReason } from './poison.js';
import type { Database } from './types.js';

/** The database cannot take this work right now (failover in progress): retry later. */
export class DatabaseUnavailableError extends Error {
  override name = 'DatabaseUnavailableError';
  constructor(
    readonly reason: string,
    options: { cause: unknown },
  ) {
    super(`database unavailable (${reason})`, options);
  }
}

/** What is running (for the log and the disposal's cause), and whether it may run once more. */
export type PoisonRetryOptions = PoisonedWork & {
  /** Run once more on a fresh pool: only for work that is safe to repeat. */
  retry: boolean;
  log: Logger;
};

/**
 * Runs `fn` against the handle's current pool. A pool-poisoning error (read-only node, broken
 * connection) disposes that pool — once, however many callers hit it — and, when allowed, runs
 * `fn` exactly once more on a fresh pool. A poison error that is not retried, or strikes again,
 * becomes DatabaseUnavailableError; any other error passes through untouched.
 */
export function withPoisonRetry<T>(
  handle: DatabaseHandle,
  fn: (db: Database) => Promise<T>,
  options: PoisonRetryOptions,
): Promise<T> {
  return attempt(handle, fn, options, !options.retry);
}

// Every API request runs through here: one promise and no closure of its own until something fails.
function attempt<T>(
  handle: DatabaseHandle,
  fn: (db: Database) => Promise<T>,
  options: PoisonRetryOptions,
  final: boolean,
): Promise<T> {
  const generation = handle.generation;
  let running: Promise<T>;
  try {
    running = fn(handle.db);
  } catch (err) {
    running = Promise.reject(err);
  }
  return running.catch((err: unknown) => {
    const reason = poisonReason(err);
    if (reason === undefined) throw err;
    const work: PoisonedWork =
      options.source === 'request' ? { source: 'request' } : { source: options.source, name: options.name };
    const source = describeWork(work);
    // The failover episode warns once and counts; each poisoned call is only an info line.
    handle.episodes.sign('poison', reason, source);
    options.log.info('database pool poisoned', { source, reason, retrying: !final });
    // The swap is synchronous; ending the old pool waits for its queries, so it is not awaited.
    void handle.dispose({ ...work, reason }, generation);
    if (final) throw new DatabaseUnavailableError(reason, { cause: err });
    return attempt(handle, fn, options, true);
  });
}
