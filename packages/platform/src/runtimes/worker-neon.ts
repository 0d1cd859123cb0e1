import { createNeonDriver } from '../db/drivers/neon.js';
import { ConfigError } from '../util/config.js';
import type { IsolateDatabase } from './worker-database.js';

/**
 * Neon's serverless driver at DATABASE_URL: the app over WebSockets (or HTTP with
 * DATABASE_DRIVER=neon-http), the probe over HTTP. Needs no binding, so it comes last.
 *
 * @example
 * ```ts
 * export default createIsolateHandlers(app, { databases: [neonIsolateDatabase] });
 * ```
 */
export const neonIsolateDatabase: IsolateDatabase = {
  name: 'neon',
  detect: () => ({ defaults: { DATABASE_DRIVER: 'neon-ws' } }),
  createDriver(config, _bindings, log) {
    const database =
      config.database.driver === 'pglite' || config.database.driver === 'pg'
        ? { ...config.database, driver: 'neon-ws' as const }
        : config.database;
    if (!('url' in database)) throw new ConfigError(['DATABASE_URL is required on Workers']);
    return createNeonDriver(config, database, log);
  },
};
