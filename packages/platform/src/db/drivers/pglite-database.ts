import { lockFileOf } from '../../util/identity.js';
import type { ProcessDatabase } from '../process-database.js';
import { createPgliteDriver } from './pglite.js';

/**
 * The embedded database (PGlite) in its data directory (`.data/pglite`, or `memory://`), locked under
 * the app's name so that a second process never opens it too. Offered, it serves when DATABASE_URL is
 * unset.
 *
 * @example
 * ```ts
 * await runOnNode(app, { databases: [pgliteDatabase, pgDatabase] });
 * ```
 */
export const pgliteDatabase: ProcessDatabase = {
  name: 'pglite',
  serves: ['pglite'],
  createDriver(config, _log, identity) {
    const { database } = config;
    if (database.driver !== 'pglite') throw new Error(`the pglite driver cannot open ${database.driver}`);
    return createPgliteDriver({ dataDir: database.dataDir, lockFile: lockFileOf(identity) });
  },
};
