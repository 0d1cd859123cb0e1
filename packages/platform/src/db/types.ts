import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';

// The seam between the platform and a driver: everything above this file is driver-agnostic.

export type Database = PgDatabase<PgQueryResultHKT>;

export type Row = Record<string, unknown>;

export interface QueryResult<R> {
  rows: R[];
}

/** One connection held for a sequence of statements (BEGIN ... COMMIT). */
export interface SqlSession {
  query<R extends Row = Row>(text: string, params?: unknown[]): Promise<QueryResult<R>>;
}

export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

export type PoolRole = 'app' | 'probe';

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

export interface PoolerInfo {
  /** `transaction`: server connections change hands between transactions (no session state survives). */
  mode: 'session' | 'transaction';
  /** `assumed`: the check itself failed, so the safe mode was chosen. */
  source: 'configured' | 'detected' | 'assumed';
}

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
