// Node-only tools for an app's scripts, never for a runtime entry: the migrations bundler (drizzle-kit
// output -> a `Migration[]` module) and the deploy-time migrator.

export { type DeployMigrateResult, migrateAtDeploy } from '../db/deploy-migrate.js';
export {
  type BundleOptions,
  bundleMigrations,
  bundleSource,
  type MigrationsBundle,
  readMigrations,
  runMigrationsBundler,
} from '../db/migrations-bundle.js';
