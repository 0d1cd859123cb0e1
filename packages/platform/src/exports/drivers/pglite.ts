export { createPgliteDriver, type PgliteDriverOptions } from '../../db/drivers/pglite.js';
export { pgliteDatabase } from '../../db/drivers/pglite-database.js';
export { DatabaseLockedError, lockDataDir } from '../../db/drivers/pglite-lock.js';
