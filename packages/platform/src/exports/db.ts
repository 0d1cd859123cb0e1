// `@honest-health/platform/db`: the database as tools and scripts open it outside a lifecycle: a
// handle, the driver the configuration picks among those offered, the migrator a process runs at
// boot, the schema verdict every runtime serves by, and the record of running releases.
export { createDriver, type DriverOptions } from '../db/driver.js';
export { DatabaseHandle } from '../db/handle.js';
export {
  type MigrateOptions,
  type MigrateResult,
  type Migration,
  type MigrationClass,
  migrate,
} from '../db/migrate.js';
export { MigrationLockWaitTimeout } from '../db/migration-retry.js';
export { chooseProcessDatabase } from '../db/process-database.js';
export {
  ContractRefused,
  DEFAULT_RELEASE_WINDOW_MS,
  expireReleases,
  type Release,
  type RunningRelease,
  recordRelease,
  releasesNeeding,
} from '../db/releases.js';
export {
  type BundledSchema,
  checkSchema,
  describeVerdict,
  releaseOf,
  requireServableSchema,
  SchemaIncompatible,
  type SchemaVerdict,
} from '../db/schema-check.js';
