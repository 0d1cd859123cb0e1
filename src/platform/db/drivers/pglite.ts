import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { drizzle } from 'drizzle-orm/pglite';
import type { DatabaseDriver, DatabasePool } from '../types.js';

export interface PgliteDriverOptions {
  /** A directory, or `memory://` for a throwaway in-memory database. */
  dataDir: string;
}

// PGlite is one embedded single-connection Postgres: every "pool" shares the instance, disposing a
// pool never closes it (nothing can poison a connection that has no network), close() does.
export function createPgliteDriver(options: PgliteDriverOptions): DatabaseDriver {
  let instance: PGlite | undefined;
  const client = (): PGlite => {
    if (!instance) {
      if (!options.dataDir.includes('://')) mkdirSync(options.dataDir, { recursive: true });
      instance = new PGlite(options.dataDir);
    }
    return instance;
  };

  return {
    name: 'pglite',
    createPool(): DatabasePool {
      const pglite = client();
      return {
        db: drizzle({ client: pglite }),
        query: (text, params) => pglite.query(text, params),
        withSession: (fn) => fn({ query: (text, params) => pglite.query(text, params) }),
        stats: () => ({ total: 1, idle: 1, waiting: 0 }),
        end: async () => {},
      };
    },
    ready: () => client().waitReady,
    async close() {
      await instance?.close();
      instance = undefined;
    },
  };
}
