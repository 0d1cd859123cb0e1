export { createPgliteDriver, type PgliteDriverOptions } from '../../db/drivers/pglite.js';
export { DatabaseLockedError, LOCK_FILE, lockDataDir } from '../../db/drivers/pglite-lock.js';
