import { createErrorTracker, disabledErrorTracker } from '../util/error-tracking.js';
import type { IsolateErrorTracking } from './worker-errors.js';

/**
 * Sentry's own SDK inside the bundle (createErrorTracker), with SENTRY_DSN among the Worker's secrets:
 * no Tail Worker, at the cost of the SDK in the bundle (docs/worker-bundle.md).
 *
 * @example
 * ```ts
 * import { createIsolateHandlers } from '@honest-health/platform/worker';
 * import { sentryErrorTracking } from '@honest-health/platform/worker/sentry';
 *
 * export default createIsolateHandlers(app, { databases, errorTracking: sentryErrorTracking });
 * ```
 */
export const sentryErrorTracking: IsolateErrorTracking = {
  name: 'sentry',
  create: async (env) => (env.SENTRY_DSN ? createErrorTracker(env.SENTRY_DSN) : disabledErrorTracker),
};
