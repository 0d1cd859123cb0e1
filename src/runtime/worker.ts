import { neonIsolateDatabase } from '@honest-health/platform/drivers/neon';
import { createIsolateHandlers } from '@honest-health/platform/worker';
import { honestHealth } from '../app/module.js';

// Neon's serverless driver at DATABASE_URL. With Hyperdrive, deploy worker-hyperdrive.ts instead
// (docs/deploy-workers.md): one bundle with both drivers would be over the size budget.
const { fetch, scheduled } = createIsolateHandlers(honestHealth, { databases: [neonIsolateDatabase] });

export default { fetch, scheduled };
