import type { ProcessDatabase } from '../process-database.js';
import { createPgDriver } from './pg.js';

/**
 * node-postgres at DATABASE_URL, for a process or a tool: an application pool of POOL_MAX and a
 * probe pool of two, `application_name` `<app>:<pool>`, a check for a transaction pooler at boot.
 *
 * @example
 * ```ts
 * await runOnNode(app, { databases: [pgDatabase] });
 * ```
 */
export const pgDatabase: ProcessDatabase = {
  name: 'pg',
  serves: ['pg'],
  createDriver(config, log, identity) {
    if (config.database.driver !== 'pg')
      throw new Error(`the pg driver cannot open ${config.database.driver}`);
    return createPgDriver({
      url: config.database.url,
      poolMax: config.poolMax,
      maxLifetimeSeconds: config.poolMaxLifetimeSeconds,
      probeTimeoutMs: config.probeTimeoutMs,
      pooler: config.databasePooler,
      applicationName: identity.name,
      statementTimeoutMs: config.statementTimeoutMs,
      log,
    });
  },
};
