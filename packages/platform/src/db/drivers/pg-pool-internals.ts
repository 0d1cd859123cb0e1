import type { Logger } from '../../util/log.js';

// pg-pool has no public call that closes its idle clients but keeps the pool (its API: connect, query,
// end, totalCount/idleCount/waitingCount, and events). Its own end() does it as
// `this._idle.slice().map((item) => { this._remove(item.client) })`, and the Neon driver's Pool is a
// port of pg-pool with the same fields. _remove() takes the client out of the pool at once and ends
// it in the background; the pulse lets callers queued on a full pool open the connections that freed
// up. Clients lent out are retired as pg-pool retires one that outlived maxLifetimeSeconds while in
// use: put in `_expired`, which its release path checks, so the client is closed when it comes back
// instead of going idle. Checked against the pinned versions (pg-pool 3.14, through pg 8.23.1;
// @neondatabase/serverless 1.2.0) by packages/platform/test/dependency-internals.test.ts, which fails
// the moment a field is gone.
export interface PgPoolInternals {
  _clients: unknown[];
  _idle: { client: unknown }[];
  _expired: WeakSet<object>;
  _remove: (client: unknown) => void;
  _pulseQueue: () => void;
}

/** The pool's private fields this module uses, if they are all there. */
export function poolInternals(pool: object): PgPoolInternals | undefined {
  const p = pool as Partial<PgPoolInternals>;
  return Array.isArray(p._clients) &&
    Array.isArray(p._idle) &&
    p._expired instanceof WeakSet &&
    typeof p._remove === 'function' &&
    typeof p._pulseQueue === 'function'
    ? (p as PgPoolInternals)
    : undefined;
}

let warned = false;

/**
 * Closes the pool's idle clients now and its lent-out ones when they come back (a query that succeeds
 * on a connection pinned to the old node must not return it to the pool); how many it closed now.
 * Without the fields (an upgrade removed them) says so, once.
 */
export function closeIdleClients(pool: object, log: Logger): number {
  const internals = poolInternals(pool);
  if (!internals) {
    if (!warned)
      log.warn('cannot close idle database connections: pg-pool internals changed (see docs/poolers.md)');
    warned = true;
    return 0;
  }
  const idle = internals._idle.slice();
  const idleClients = new Set(idle.map((item) => item.client));
  for (const client of internals._clients)
    if (!idleClients.has(client) && typeof client === 'object' && client !== null)
      internals._expired.add(client);
  for (const item of idle) internals._remove.call(pool, item.client);
  if (idle.length > 0) internals._pulseQueue.call(pool);
  return idle.length;
}
