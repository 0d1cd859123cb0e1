import { honestHealth } from '../app/module.js';
import { createIsolateHandlers } from '../platform/lifecycle/isolate.js';
import { hyperdriveIsolateDatabase } from '../platform/lifecycle/isolate-hyperdrive.js';

// node-postgres through the HYPERDRIVE binding (wrangler.toml's [[hyperdrive]], docs/deploy-workers.md).
const { fetch, scheduled } = createIsolateHandlers(honestHealth, {
  databases: [hyperdriveIsolateDatabase()],
});

export default { fetch, scheduled };
