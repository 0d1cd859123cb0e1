export { sentryErrorTracking } from '../lifecycle/isolate-errors-sentry.js';
