export { createNeonDriver } from '../../db/drivers/neon.js';
export { neonDatabase } from '../../db/drivers/neon-database.js';
export { neonIsolateDatabase } from '../../runtimes/worker-neon.js';
