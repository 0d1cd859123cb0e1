// The Worker with Sentry's SDK in the bundle instead of the errors Tail Worker, as docs/deploy-workers.md
// tells a user to build it (`errorTracking: sentryErrorTracking`); test/worker-sentry.test.ts runs it.
import { neonIsolateDatabase } from '@honest-health/platform/drivers/neon';
import { createIsolateHandlers } from '@honest-health/platform/worker';
import { sentryErrorTracking } from '@honest-health/platform/worker/sentry';
import { honestHealth } from '../../src/app/module.js';

const { fetch, scheduled } = createIsolateHandlers(honestHealth, {
  databases: [neonIsolateDatabase],
  errorTracking: sentryErrorTracking,
});

export default { fetch, scheduled };
