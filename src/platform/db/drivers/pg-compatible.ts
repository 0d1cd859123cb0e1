import type { Logger } from '../../log.js';
import { isPoisoned } from '../poison.js';
import type { Database, DatabasePool, PoolRole, Row, SqlSession } from '../types.js';

// What node-postgres' Pool and the Neon driver's WebSocket Pool (a port of it) have in common.
export interface PgCompatibleClient {
  query(text: string, params?: unknown[]): Promise<{ rows: Row[] }>;
  release(err?: Error | boolean): void;
}

export interface PgCompatiblePool {
  connect(): Promise<PgCompatibleClient>;
  query(text: string, params?: unknown[]): Promise<{ rows: Row[] }>;
  on(event: 'error', listener: (err: Error) => void): unknown;
  end(): Promise<void>;
  readonly totalCount: number;
  readonly idleCount: number;
  readonly waitingCount: number;
}

const poisonedBy = new WeakMap<object, Error>();

/**
 * Makes every checked-out client remember a poison error it saw and hand it to release(), so the
 * pool evicts the client instead of lending it out again. Drizzle's transactions call release()
 * with no argument, which would otherwise return a client pinned to a read-only node to the pool.
 * (pool.query() already releases with the error; this covers connect()ed clients.)
 */
export function evictPoisonedClients(pool: PgCompatiblePool): void {
  // biome-ignore lint/suspicious/noExplicitAny: connect() is overloaded (callback and promise forms) and pool.query() calls the callback form through `this`
  const target = pool as any;
  const connect = target.connect.bind(pool);
  target.connect = (
    callback?: (err: Error | undefined, client?: PgCompatibleClient, done?: unknown) => void,
  ) => {
    if (callback) return connect(callback);
    return connect().then((client: PgCompatibleClient) => track(client));
  };
}

function track(client: PgCompatibleClient): PgCompatibleClient {
  poisonedBy.delete(client);
  const query = client.query;
  const release = client.release;
  // Patched per checkout: the pool assigns a fresh release() on every checkout.
  client.query = function (this: PgCompatibleClient, ...args: Parameters<PgCompatibleClient['query']>) {
    const result = query.apply(this, args);
    if (result && typeof result.then === 'function') {
      result.catch((err: unknown) => {
        if (err instanceof Error && isPoisoned(err)) poisonedBy.set(client, err);
      });
    }
    return result;
  } as PgCompatibleClient['query'];
  client.release = (err?: Error | boolean) => {
    client.query = query;
    client.release = release;
    release.call(client, err ?? poisonedBy.get(client));
  };
  return client;
}

export function wrapPgCompatiblePool(
  pool: PgCompatiblePool,
  db: Database,
  role: PoolRole,
  log: Logger,
): DatabasePool {
  let ending = false;
  // Without a listener an idle client's error (server restart, failover) crashes the process.
  // Errors while the pool is being ended are its own sockets closing, not news.
  pool.on('error', (err) => {
    if (!ending) log.warn('idle database client failed', { pool: role, err });
  });
  evictPoisonedClients(pool);
  return {
    db,
    query: <R extends Row>(text: string, params?: unknown[]) =>
      pool.query(text, params) as Promise<{ rows: R[] }>,
    async withSession<T>(fn: (session: SqlSession) => Promise<T>): Promise<T> {
      const client = await pool.connect();
      try {
        const result = await fn(client as SqlSession);
        client.release();
        return result;
      } catch (err) {
        // Destroy rather than reuse: the session may hold a lock or sit in an aborted transaction.
        client.release(err instanceof Error ? err : true);
        throw err;
      }
    },
    stats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    closeIdle: () => closeIdleClients(pool),
    end: () => {
      ending = true;
      const ended = pool.end();
      // pg-pool neither serves nor fails callers still queued for a client once end() is called: they
      // would wait out connectionTimeoutMillis. Fail them now, as a later connect() would, so the
      // request path retries them on the fresh pool at once. (_pendingQueue is pg-pool's own field.)
      const queue = (pool as unknown as { _pendingQueue?: { callback(err: Error): void }[] })._pendingQueue;
      for (const item of queue?.splice(0) ?? [])
        item.callback(new Error('Cannot use a pool after calling end on the pool'));
      return ended;
    },
  };
}

// pg-pool has no public call that closes its idle clients but keeps the pool. Its own end() does it
// as `this._idle.slice().map((item) => { this._remove(item.client) })` (pg-pool 3.x _pulseQueue);
// the Neon driver's Pool is a port of pg-pool with the same fields. _remove() takes the client out of
// the pool at once and ends it in the background. The pulse lets callers queued on a full pool open
// the connections that freed up. Without those fields (another pool), nothing is closed.
type PgPoolInternals = {
  _idle?: { client: unknown }[];
  _remove?: (client: unknown) => void;
  _pulseQueue?: () => void;
};

function closeIdleClients(pool: PgCompatiblePool): number {
  const internals = pool as unknown as PgPoolInternals;
  if (!Array.isArray(internals._idle) || typeof internals._remove !== 'function') return 0;
  const idle = internals._idle.slice();
  for (const item of idle) internals._remove.call(pool, item.client);
  if (idle.length > 0) internals._pulseQueue?.call(pool);
  return idle.length;
}
