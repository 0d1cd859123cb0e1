import { hyperdriveIsolateDatabase } from '@honest-health/platform/drivers/hyperdrive';
import { createIsolateHandlers, tailErrorTracking } from '@honest-health/platform/worker';
import { honestHealth } from '../app/module.js';

// node-postgres through the HYPERDRIVE binding (wrangler.toml's [[hyperdrive]], docs/deploy-workers.md).
const { fetch, scheduled } = createIsolateHandlers(honestHealth, {
  databases: [hyperdriveIsolateDatabase()],
  errorTracking: tailErrorTracking,
});

export default { fetch, scheduled };
