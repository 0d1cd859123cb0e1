import { honestHealth } from '../app/module.js';
import { createIsolateHandlers } from '../platform/lifecycle/isolate.js';
import { neonIsolateDatabase } from '../platform/lifecycle/isolate-neon.js';

// Neon's serverless driver at DATABASE_URL. With Hyperdrive, deploy worker-hyperdrive.ts instead
// (docs/deploy-workers.md): one bundle with both drivers would be over the size budget.
const { fetch, scheduled } = createIsolateHandlers(honestHealth, { databases: [neonIsolateDatabase] });

export default { fetch, scheduled };
