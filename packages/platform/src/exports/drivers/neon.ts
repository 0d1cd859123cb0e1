export { createNeonDriver } from '../../db/drivers/neon.js';
export { neonIsolateDatabase } from '../../lifecycle/isolate-neon.js';
