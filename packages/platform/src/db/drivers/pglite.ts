import { mkdirSync } from 'node:fs';
import type { PGlite } from '@electric-sql/pglite';
import { DEFAULT_IDENTITY, lockFileOf } from '../../util/identity.js';
import type { DatabaseDriver, DatabasePool } from '../types.js';
import { lockDataDir } from './pglite-lock.js';

/** Options of `createPgliteDriver`. */
export interface PgliteDriverOptions {
  /** A directory, or `memory://` for a throwaway in-memory database. */
  dataDir: string;
  /** The lock file's name in the data directory, the app's (`lockFileOf`): `app.lock` by default. */
  lockFile?: string;
}

/**
 * PGlite is one embedded single-connection Postgres: every "pool" shares the instance, disposing a
 * pool never closes it (nothing can poison a connection that has no network), close() does.
 * Its modules load in ready(), so a server on a real Postgres never pays for them.
 */
export function createPgliteDriver(options: PgliteDriverOptions): DatabaseDriver {
  let instance: PGlite | undefined;
  let unlock: (() => void) | undefined;
  let drizzle: typeof import('drizzle-orm/pglite').drizzle | undefined;

  return {
    name: 'pglite',
    async ready() {
      if (instance) return instance.waitReady;
      const [pglite, orm] = await Promise.all([import('@electric-sql/pglite'), import('drizzle-orm/pglite')]);
      drizzle = orm.drizzle;
      if (!options.dataDir.includes('://')) {
        mkdirSync(options.dataDir, { recursive: true });
        // Before opening: a second process must never open a data directory another one holds.
        unlock ??= lockDataDir(options.dataDir, options.lockFile ?? lockFileOf(DEFAULT_IDENTITY));
      }
      try {
        instance = new pglite.PGlite(options.dataDir);
        await instance.waitReady;
      } catch (err) {
        instance = undefined;
        unlock?.();
        unlock = undefined;
        throw err;
      }
    },
    createPool(): DatabasePool {
      if (!instance || !drizzle) throw new Error('the pglite driver is not ready');
      const pglite = instance;
      return {
        db: drizzle({ client: pglite }),
        query: (text, params) => pglite.query(text, params),
        withSession: (fn) => fn({ query: (text, params) => pglite.query(text, params) }),
        singleSession: true,
        stats: () => ({ total: 1, idle: 1, waiting: 0 }),
        end: async () => {},
      };
    },
    async close() {
      try {
        await instance?.close();
      } finally {
        instance = undefined;
        unlock?.();
        unlock = undefined;
      }
    },
  };
}
