import { hyperdriveIsolateDatabase } from '@honest-health/platform/drivers/hyperdrive';
import { createIsolateHandlers, tailErrorTracking } from '@honest-health/platform/worker';
import { honestHealth } from '../app/module.js';

// node-postgres through the Hyperdrive bindings (wrangler.toml's [[hyperdrive]] blocks): HYPERDRIVE_UNCACHED
// for writes and every read that decides, HYPERDRIVE (cached) for the harmless ones (docs/deploy-workers.md).
const { fetch, scheduled } = createIsolateHandlers(honestHealth, {
  databases: [hyperdriveIsolateDatabase()],
  errorTracking: tailErrorTracking,
});

export default { fetch, scheduled };
