import { SchemaIncompatible } from '../db/schema-check.js';
import { ConfigError } from '../util/config.js';
import { errorCode } from '../util/error-chain.js';
import { TimeoutError } from '../util/timeout.js';

/** Why an isolate's last boot failed, as readiness reports it (checks.database). */
export type IsolateBootCause =
  | 'configuration'
  | 'unreachable'
  | 'timeout'
  | 'schema_behind'
  | 'schema_contracted';

export class IsolateBootError extends Error {
  override name = 'IsolateBootError';
  constructor(
    readonly bootCause: IsolateBootCause,
    message: string,
    options?: { cause: unknown },
  ) {
    super(message, options);
  }
}

/** A connection or query that failed during the boot: the database is unreachable (or too slow). */
export function bootCauseOf(err: unknown): IsolateBootError {
  if (err instanceof IsolateBootError) return err;
  if (err instanceof ConfigError) return new IsolateBootError('configuration', err.message, { cause: err });
  if (err instanceof SchemaIncompatible) {
    const cause = err.verdict.status === 'behind' ? 'schema_behind' : 'schema_contracted';
    return new IsolateBootError(cause, err.message, { cause: err });
  }
  const timeout = err instanceof TimeoutError;
  const code = errorCode(err);
  return new IsolateBootError(
    timeout ? 'timeout' : 'unreachable',
    `the database is ${timeout ? 'too slow' : 'unreachable'}${code ? ` (${code})` : ''}`,
    { cause: err },
  );
}

/** The last failed boot and when the next may start. */
export interface BootBackoff {
  cause: IsolateBootCause;
  /** What failed, for `/readyz?verbose`: names no secret (no URL, no value). */
  reason: string;
  retryAt: number;
  /** Failed attempts in a row. */
  attempts: number;
}

/** The waits after the 1st, 2nd and every later failed boot. */
export const BOOT_RETRY_MS: readonly number[] = [1000, 5000, 30_000];

/**
 * One boot at a time, until one succeeds: callers that arrive while it runs share it, and after a
 * failure the next one starts only once its back-off has passed (the callers in between are answered
 * at once). Never retried on every request: a database that is down is not hammered by every isolate.
 */
export class RetryingBoot {
  #booted = false;
  #running: Promise<boolean> | undefined;
  #failure: BootBackoff | undefined;
  #attempts = 0;

  get failure(): Readonly<BootBackoff> | undefined {
    return this.#failure;
  }

  /** Attempts so far, the successful one included. */
  get attempts(): number {
    return this.#attempts;
  }

  /** True once booted: at once after a success, else by the boot in flight or a new one. */
  run(
    boot: () => Promise<void>,
    onFailure: (err: IsolateBootError, retryInMs: number) => void,
  ): Promise<boolean> {
    if (this.#booted) return Promise.resolve(true);
    if (this.#running) return this.#running;
    if (this.#failure && Date.now() < this.#failure.retryAt) return Promise.resolve(false);
    this.#attempts += 1;
    this.#running = boot()
      .then(
        () => {
          this.#booted = true;
          this.#failure = undefined;
          return true;
        },
        (err: unknown) => {
          const failed = bootCauseOf(err);
          const attempts = (this.#failure?.attempts ?? 0) + 1;
          const wait = BOOT_RETRY_MS[Math.min(attempts, BOOT_RETRY_MS.length) - 1] ?? 30_000;
          this.#failure = {
            cause: failed.bootCause,
            reason: failed.message,
            retryAt: Date.now() + wait,
            attempts,
          };
          onFailure(failed, wait);
          return false;
        },
      )
      .finally(() => {
        this.#running = undefined;
      });
    return this.#running;
  }
}
