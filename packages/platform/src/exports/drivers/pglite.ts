export { createPgliteDriver, type PgliteDriverOptions } from '../../db/drivers/pglite.js';
export { DatabaseLockedError, lockDataDir } from '../../db/drivers/pglite-lock.js';
