export { sentryErrorTracking } from '../runtimes/worker-errors-sentry.js';
