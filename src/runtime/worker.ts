import { neonIsolateDatabase } from '@honest-health/platform/drivers/neon';
import { createIsolateHandlers, tailErrorTracking } from '@honest-health/platform/worker';
import { honestHealth } from '../app/module.js';

// Neon's serverless driver at DATABASE_URL. With Hyperdrive, deploy worker-hyperdrive.ts instead
// (docs/deploy-workers.md): one bundle with both drivers would be over the size budget. Errors go to
// the Tail Worker (worker-errors.ts), which carries the Sentry SDK, with ERROR_REPORTS=tail.
const { fetch, scheduled } = createIsolateHandlers(honestHealth, {
  databases: [neonIsolateDatabase],
  errorTracking: tailErrorTracking,
});

export default { fetch, scheduled };
