// `@honest-health/platform/db`: the database as tools and scripts open it outside a lifecycle: a
// handle, the driver the configuration picks among those offered, and the migrator a process runs at
// boot.
export { createDriver, type DriverOptions } from '../db/driver.js';
export { DatabaseHandle } from '../db/handle.js';
export {
  type MigrateOptions,
  type MigrateResult,
  type Migration,
  migrate,
  type SchemaState,
  schemaState,
} from '../db/migrate.js';
export { chooseProcessDatabase } from '../db/process-database.js';
