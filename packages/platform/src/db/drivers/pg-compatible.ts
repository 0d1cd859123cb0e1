import type { Logger } from '../../util/log.js';
import { isPoisoned } from '../poison.js';
import type { Database, DatabasePool, PoolRole, Row, SqlSession } from '../types.js';
import { closeIdleClients } from './pg-pool-internals.js';

// What node-postgres' Pool and the Neon driver's WebSocket Pool (a port of it) have in common.
export interface PgCompatibleClient {
  query(text: string, params?: unknown[]): Promise<{ rows: Row[] }>;
  release(err?: Error | boolean): void;
}

/** A pool with node-postgres's interface (pg's own, or Hyperdrive's), as `wrapPgCompatiblePool` takes it. */
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

type ConnectCallback = (err: Error | undefined, client?: PgCompatibleClient, done?: unknown) => void;

/**
 * Wraps the pool's own connect() (both forms: pool.query() calls the callback form through `this`):
 * - every checked-out client remembers a poison error it saw and hands it to release(), so the pool
 *   evicts the client instead of lending it out again. Drizzle's transactions call release() with no
 *   argument, which would otherwise return a client pinned to a read-only node to the pool.
 *   (pool.query() already releases with the error; this covers connect()ed clients.)
 * - callers still waiting for a client can be failed at once (the returned function): pg-pool's end()
 *   neither serves nor fails them, so they would wait out connectionTimeoutMillis. A client that
 *   arrives for a caller already failed goes straight back (to a pool that is ending: it is closed).
 */
export function wrapConnect(
  pool: PgCompatiblePool,
  /** Run on a client before it is handed out; a promise only for a client not yet prepared. */
  prepare?: (client: PgCompatibleClient) => Promise<unknown> | undefined,
): (err: Error) => void {
  // biome-ignore lint/suspicious/noExplicitAny: connect() is overloaded (callback and promise forms) and pool.query() calls the callback form through `this`
  const target = pool as any;
  const connect = target.connect.bind(pool);
  const waiting = new Set<(err: Error) => void>();
  const waitFor = (callback: ConnectCallback, wrapClient: (c: PgCompatibleClient) => PgCompatibleClient) => {
    let settled = false;
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      waiting.delete(fail);
      callback(err);
    };
    waiting.add(fail);
    connect((err: Error | undefined, client?: PgCompatibleClient, done?: unknown) => {
      if (settled) {
        client?.release();
        return;
      }
      if (err || !client) {
        settled = true;
        waiting.delete(fail);
        return callback(err);
      }
      const hand = () => {
        if (settled) return client.release();
        settled = true;
        waiting.delete(fail);
        callback(undefined, wrapClient(client), done);
      };
      // Awaited before the caller gets the client: a query queued behind another on one client is
      // deprecated in node-postgres 8 and gone in 9.
      const ready = prepare?.(client);
      if (!ready) return hand();
      ready.then(hand, (failed: Error) => {
        client.release(failed);
        if (settled) return;
        settled = true;
        waiting.delete(fail);
        callback(failed);
      });
    });
  };
  target.connect = (callback?: ConnectCallback) => {
    if (callback) return waitFor(callback, (client) => client);
    return new Promise<PgCompatibleClient>((resolve, reject) =>
      waitFor(
        (err, client) => (err || !client ? reject(err) : resolve(client)),
        (client) => track(client),
      ),
    );
  };
  return (err) => {
    for (const fail of [...waiting]) fail(err);
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

/**
 * STATEMENT_TIMEOUT_MS on the application pool: a session setting made as each connection is first
 * handed out (a round trip per connection, not per query). Only where sessions last (direct, a session pooler): behind a transaction
 * pooler a SET would land on a server connection other clients share, so there it is left to the
 * role (`ALTER ROLE … SET statement_timeout`) or the pooler (docs/poolers.md).
 */
export interface SessionTimeout {
  statementTimeoutMs: number;
  /** Whether a session setting stays with this connection (false behind a transaction pooler). */
  sessionsLast(): boolean;
}

/**
 * A `DatabasePool` over a node-postgres-compatible pool and its Drizzle database: a poisoned client is
 * released with its error, so the pool destroys it.
 */
export function wrapPgCompatiblePool(
  pool: PgCompatiblePool,
  db: Database,
  role: PoolRole,
  log: Logger,
  timeout?: SessionTimeout,
): DatabasePool {
  let ending = false;
  // Without a listener an idle client's error (server restart, failover) crashes the process.
  // Errors while the pool is being ended are its own sockets closing, not news.
  pool.on('error', (err) => {
    if (!ending) log.warn('idle database client failed', { pool: role, err });
  });
  const bounded = timeout !== undefined && timeout.statementTimeoutMs > 0;
  const setStatementTimeout = (client: PgCompatibleClient, ms: number) =>
    client.query(`SET statement_timeout = ${Math.trunc(ms)}`);
  const prepared = new WeakSet<object>();
  const failWaiting = wrapConnect(
    pool,
    bounded
      ? (client) => {
          if (prepared.has(client)) return undefined;
          prepared.add(client);
          return timeout.sessionsLast() ? setStatementTimeout(client, timeout.statementTimeoutMs) : undefined;
        }
      : undefined,
  );
  return {
    db,
    query: <R extends Row>(text: string, params?: unknown[]) =>
      pool.query(text, params) as Promise<{ rows: R[] }>,
    async withSession<T>(fn: (session: SqlSession) => Promise<T>): Promise<T> {
      const client = await pool.connect();
      // A session is for migrations and locks, which may rightly take longer: unbounded while held.
      const unbound = bounded && timeout.sessionsLast();
      try {
        if (unbound) await setStatementTimeout(client, 0);
        const result = await fn(client as SqlSession);
        if (unbound) await setStatementTimeout(client, timeout.statementTimeoutMs);
        client.release();
        return result;
      } catch (err) {
        // Destroy rather than reuse: the session may hold a lock or sit in an aborted transaction.
        client.release(err instanceof Error ? err : true);
        throw err;
      }
    },
    stats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    closeIdle: () => closeIdleClients(pool, log),
    end: () => {
      ending = true;
      const ended = pool.end();
      // Fail queued callers as a later connect() would, so the request path retries them on the fresh
      // pool at once (poison.ts: "pool ended").
      failWaiting(new Error('Cannot use a pool after calling end on the pool'));
      return ended;
    },
  };
}
