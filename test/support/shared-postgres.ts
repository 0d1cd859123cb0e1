// One Postgres cluster for the whole integration run, started by the global setup (global-setup.ts):
// a file that needs only databases takes them from it (freshDatabase, ownedDatabase) instead of paying
// initdb and a start of its own. A file that stops, restarts, promotes or reconfigures its server,
// needs a standby, or counts anything cluster-wide keeps its own startCluster().
import { inject } from 'vitest';
import { type Cluster, superuserQuery } from './postgres.js';

export interface SharedPostgres {
  port: number;
  dir: string;
  dataDir: string;
  logFile: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    sharedPostgres: SharedPostgres;
  }
}

const notOurs = (what: string) => () =>
  Promise.reject(new Error(`the shared cluster is every file's: ${what} needs a startCluster() of its own`));

/**
 * The run's shared cluster. Its remove() drops what this file made there: freshDatabase/ownedDatabase
 * name their databases and roles after the process id, and a process runs its files one at a time.
 */
export function sharedCluster(): Cluster {
  const shared = inject('sharedPostgres');
  const { port } = shared;
  const mine = `%\\_${process.pid}\\_%`;
  return {
    host: '127.0.0.1',
    port,
    dir: shared.dir,
    dataDir: shared.dataDir,
    logFile: shared.logFile,
    url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
    query: (sql, params) => superuserQuery('127.0.0.1', port, sql, params),
    stop: notOurs('stopping'),
    start: notOurs('starting'),
    promote: notOurs('promoting'),
    async remove() {
      const databases = await superuserQuery<{ datname: string }>(
        '127.0.0.1',
        port,
        'SELECT datname FROM pg_database WHERE datname LIKE $1',
        [mine],
      );
      for (const { datname } of databases.rows)
        await superuserQuery('127.0.0.1', port, `DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
      const roles = await superuserQuery<{ rolname: string }>(
        '127.0.0.1',
        port,
        'SELECT rolname FROM pg_roles WHERE rolname LIKE $1',
        [mine],
      );
      for (const { rolname } of roles.rows)
        await superuserQuery('127.0.0.1', port, `DROP ROLE IF EXISTS "${rolname}"`);
    },
    // Every file's statements are in it: a file that reads its server's log needs a cluster of its own.
    readLog: () => {
      throw new Error("the shared cluster is every file's: its log needs a startCluster() of its own");
    },
  };
}
