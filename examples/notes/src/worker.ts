import { hyperdriveIsolateDatabase } from '@honest-health/platform/drivers/hyperdrive';
import { createIsolateHandlers } from '@honest-health/platform/worker';
import { notesApp } from './module.js';

// pg through the HYPERDRIVE binding (wrangler.toml). For Neon's driver at DATABASE_URL instead, pass
// neonIsolateDatabase from '@honest-health/platform/drivers/neon'.
const { fetch, scheduled } = createIsolateHandlers(notesApp, { databases: [hyperdriveIsolateDatabase()] });

export default { fetch, scheduled };
