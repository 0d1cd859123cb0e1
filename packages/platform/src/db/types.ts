import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';

// The seam between the platform and a driver: everything above this file is driver-agnostic.

/** A Drizzle Postgres database, whatever the driver under it: what routes and ticks query. */
export type Database = PgDatabase<PgQueryResultHKT>;

/** A row of a raw query, by column name. */
export type Row = Record<string, unknown>;

/** The rows of a raw query. */
export interface QueryResult<R> {
  rows: R[];
}

/** One connection held for a sequence of statements (BEGIN ... COMMIT). */
export interface SqlSession {
  query<R extends Row = Row>(text: string, params?: unknown[]): Promise<QueryResult<R>>;
}

/** A pool's connections: in all, idle, and callers waiting for one. */
export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

/** Which pool: the app's, or the write probe's own small one. */
export type PoolRole = 'app' | 'probe';

/**
 * One pool of a driver: a Drizzle database over it, raw queries, a session for a transaction, and its end.
 */
export interface DatabasePool {
  readonly db: Database;
  query<R extends Row = Row>(text: string, params?: unknown[]): Promise<QueryResult<R>>;
  withSession<T>(fn: (session: SqlSession) => Promise<T>): Promise<T>;
  /**
   * True where the pool is one connection that one process owns (the embedded database): its sessions
   * are the same connection, so nothing may hold one session open while using another.
   */
  readonly singleSession?: boolean;
  stats(): PoolStats;
  /**
   * Closes the connections that sit idle now and the ones in use when they are released, keeps the
   * pool; returns how many it closed now. What a damped disposal does (episode.ts). Absent where there
   * are no connections to close.
   */
  closeIdle?(): number;
  end(): Promise<void>;
}

/** Whether a transaction-mode pooler sits in front of the database, and how that was found out. */
export interface PoolerInfo {
  /** `transaction`: server connections change hands between transactions (no session state survives). */
  mode: 'session' | 'transaction';
  /** `assumed`: the check itself failed, so the safe mode was chosen. */
  source: 'configured' | 'detected' | 'assumed';
}

/** One database driver (pg, Neon, PGlite, Hyperdrive): builds the pools a handle throws away and rebuilds. */
export interface DatabaseDriver {
  readonly name: string;
  /**
   * Finds out (or takes from config) whether a transaction-mode pooler sits in front, and adapts
   * (no named prepared statements). Called once the database answers; absent where it cannot matter.
   */
  inspectPooler?(): Promise<PoolerInfo>;
  createPool(role: PoolRole): DatabasePool;
  /** Resolves when the driver can take queries: the embedded database starts here, unbounded by network timeouts. */
  ready(): Promise<void>;
  /** Releases what outlives a pool (the embedded PGlite instance). */
  close(): Promise<void>;
}
