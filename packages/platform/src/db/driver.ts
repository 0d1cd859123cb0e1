import type { Config } from '../util/config.js';
import { type AppIdentity, resolveIdentity } from '../util/identity.js';
import type { Logger } from '../util/log.js';
import { chooseProcessDatabase, type ProcessDatabase } from './process-database.js';
import type { DatabaseDriver } from './types.js';

/** What `createDriver` chooses among, and the identity it names connections with. */
export interface DriverOptions {
  /** The drivers on offer, each imported from its own entry: the configuration picks one. */
  databases: readonly ProcessDatabase[];
  /** Names the connections and the embedded database's lock: an app's tools pass the app's. */
  identity?: AppIdentity;
}

/**
 * A driver for the configured database, among those offered, as a tool or a script opens it outside
 * a lifecycle. Each driver imports its modules in ready(): loading every driver (PGlite's WASM glue,
 * two Postgres clients, several Drizzle dialects) would cost a few hundred milliseconds of boot.
 *
 * @example
 * ```ts
 * const driver = createDriver(loadConfig(process.env), log, { databases: [pgliteDatabase, pgDatabase] });
 * await driver.ready();
 * await migrate(driver.createPool('app'), migrations, log);
 * await driver.close();
 * ```
 */
export function createDriver(config: Config, log: Logger, options: DriverOptions): DatabaseDriver {
  return chooseProcessDatabase(options.databases, config).createDriver(
    config,
    log,
    resolveIdentity(options.identity),
  );
}
