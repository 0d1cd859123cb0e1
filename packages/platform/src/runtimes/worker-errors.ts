import { errorLineTracker } from '../util/error-lines.js';
import { disabledErrorTracker, type ErrorTracker } from '../util/error-tracking.js';

/**
 * How a Worker bundle reports errors and Crons check-ins, chosen by import as its database is: an SDK
 * in the bundle (`sentryErrorTracking` from `@honest-health/platform/worker/sentry`), or console lines
 * its Tail Worker sends on (`tailErrorTracking`), which keeps the SDK out of the bundle. Unset: none.
 */
export interface IsolateErrorTracking {
  readonly name: string;
  /** The isolate's tracker, from its bindings. Advisory: a rejection leaves error tracking off. */
  create(env: Readonly<Record<string, string | undefined>>): Promise<ErrorTracker>;
}

/**
 * Reports as console lines for the Tail Worker (`createErrorTail`), with ERROR_REPORTS=tail; the
 * Worker names that Tail Worker in its `tail_consumers`, and SENTRY_DSN is the Tail Worker's secret.
 *
 * @example
 * ```ts
 * import { neonIsolateDatabase } from '@honest-health/platform/drivers/neon';
 * import { createIsolateHandlers, tailErrorTracking } from '@honest-health/platform/worker';
 *
 * export default createIsolateHandlers(app, { databases: [neonIsolateDatabase], errorTracking: tailErrorTracking });
 * ```
 */
export const tailErrorTracking: IsolateErrorTracking = {
  name: 'tail',
  create: async (env) => (env.ERROR_REPORTS === 'tail' ? errorLineTracker() : disabledErrorTracker),
};
