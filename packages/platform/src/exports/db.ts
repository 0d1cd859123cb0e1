// The database as tools and scripts open it outside a lifecycle: a handle, the driver the
// configuration picks among those offered, and the migrator a process runs at boot.
export * from '../db/driver.js';
export * from '../db/handle.js';
export * from '../db/migrate.js';
export { MigrationLockWaitTimeout } from '../db/migration-retry.js';
export { chooseProcessDatabase } from '../db/process-database.js';
export * from '../db/releases.js';
export * from '../db/schema-check.js';
