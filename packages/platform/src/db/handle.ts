import type { Logger } from '../util/log.js';
import { noTelemetry, type Telemetry } from '../util/telemetry.js';
import { type DisposalCause, describeDisposal } from './disposal.js';
import { FailoverEpisodes } from './episode.js';
import type { Database, DatabaseDriver, DatabasePool, PoolRole, PoolStats } from './types.js';

/**
 * A lazily built pool that can be thrown away. Callers ask for `pool` or `db` on every use and
 * never keep one across a dispose(): the next use after a dispose builds a fresh pool.
 * Handles to one database share a FailoverEpisodes, which damps disposals during a failover.
 *
 * @example
 * ```ts
 * const handle = new DatabaseHandle(driver, 'app', log);
 * await handle.db.execute(sql`SELECT 1`); // a fresh pool after any dispose()
 * ```
 */
export class DatabaseHandle {
  #pool: DatabasePool | undefined;
  #builtAt = 0;
  #generation = 0;
  #disposals = 0;
  #closed = false;
  /** Disposed pools still ending. */
  readonly #ending = new Set<Promise<void>>();

  constructor(
    private readonly driver: DatabaseDriver,
    readonly role: PoolRole,
    private readonly log: Logger,
    private readonly telemetry: Telemetry = noTelemetry,
    readonly episodes: FailoverEpisodes = new FailoverEpisodes(log),
  ) {}

  get generation(): number {
    return this.#generation;
  }

  get disposals(): number {
    return this.#disposals;
  }

  get pool(): DatabasePool {
    // After shutdown closed the handle, a late caller must fail rather than open a pool nobody ends.
    if (this.#closed) throw new Error(`${this.role} database handle is closed`);
    if (this.#pool === undefined) {
      this.#pool = this.#observe(this.driver.createPool(this.role));
      this.#builtAt = this.episodes.now();
    }
    return this.#pool;
  }

  get db(): Database {
    return this.pool.db;
  }

  stats(): PoolStats {
    return this.#pool?.stats() ?? { total: 0, idle: 0, waiting: 0 };
  }

  /**
   * Ends the current pool; the next use builds a new one. Pass the generation you observed so that
   * many callers failing on the same pool cause one rebuild, not a stampede. During a failover
   * episode a pool built since it began is kept until it is old enough (episode.ts): the call then
   * closes the pool's connections (idle ones now, those in use when released) without a rebuild.
   */
  async dispose(cause: DisposalCause, observedGeneration = this.#generation): Promise<void> {
    if (observedGeneration !== this.#generation) return;
    const old = this.#pool;
    // Nothing built since the last dispose: the next use connects afresh anyway. (Logging and
    // counting it would report a disposal that threw nothing away.)
    if (old === undefined) return;
    if (this.episodes.decide(this.role, this.#builtAt) === 'damp') {
      // The pool stays, its connections do not (idle ones now, those in use when released): they may
      // be pinned to the old node, and the caller's retry must get a connection opened now, which
      // reaches whatever is primary now.
      const closedIdle = old.closeIdle?.() ?? 0;
      this.log.debug('database pool disposal damped', {
        role: this.role,
        reason: describeDisposal(cause),
        generation: this.#generation,
        closed_idle: closedIdle,
      });
      this.telemetry.metrics.disposalDamped(this.role);
      return;
    }
    this.#pool = undefined;
    this.#generation += 1;
    this.#disposals += 1;
    // Info, not warn: the episode's start and summary are the warnings (episode.ts).
    this.log.info('database pool disposed', {
      role: this.role,
      reason: describeDisposal(cause),
      generation: this.#generation,
    });
    this.telemetry.metrics.disposal(this.role, cause);
    // Queries in flight on the old pool finish or fail on their own; ending waits for them. Callers
    // often do not await this (a failing request must not wait for the old pool), so close() does:
    // on Workers it runs in waitUntil, which keeps the ending alive past the answer.
    const ending = old
      .end()
      .catch((err: unknown) => this.log.warn('disposed pool did not end cleanly', { err }));
    this.#ending.add(ending);
    await ending;
    this.#ending.delete(ending);
  }

  // Spans for its queries (when tracing is on) and a count of connections retired at max lifetime.
  #observe(pool: DatabasePool): DatabasePool {
    const client = (pool.db as { $client?: unknown }).$client;
    this.telemetry.tracing.observeQueries(client);
    this.telemetry.metrics.observePool(this.role, client);
    return pool;
  }

  /** Final: ends the pool for shutdown, and waits for the pools disposed before it to end. */
  async close(): Promise<void> {
    this.#closed = true;
    const old = this.#pool;
    this.#pool = undefined;
    await Promise.all([old?.end(), ...this.#ending]);
  }
}
