import type { ProcessDatabase } from '../process-database.js';
import { createNeonDriver } from './neon.js';

/**
 * Neon's serverless driver at DATABASE_URL (DATABASE_DRIVER=neon-ws or neon-http), for a process: the
 * application over WebSockets or HTTP, the write probe over HTTP.
 *
 * @example
 * ```ts
 * // DATABASE_DRIVER=neon-ws DATABASE_URL=postgres://...neon.tech/db
 * await runOnNode(app, { databases: [pgDatabase, neonDatabase] });
 * ```
 */
export const neonDatabase: ProcessDatabase = {
  name: 'neon',
  serves: ['neon-ws', 'neon-http'],
  createDriver(config, log) {
    const { database } = config;
    if (database.driver !== 'neon-ws' && database.driver !== 'neon-http') {
      throw new Error(`the neon driver cannot open ${database.driver}`);
    }
    return createNeonDriver(config, database, log);
  },
};
