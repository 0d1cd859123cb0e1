import type { Logger } from '../log.js';
import type { Database, DatabaseDriver, DatabasePool, PoolRole, PoolStats } from './types.js';

export interface DisposeEvent {
  role: PoolRole;
  reason: string;
  generation: number;
}

/**
 * A lazily built pool that can be thrown away. Callers ask for `pool` or `db` on every use and
 * never keep one across a dispose(): the next use after a dispose builds a fresh pool.
 */
export class DatabaseHandle {
  #pool: DatabasePool | undefined;
  #generation = 0;
  #disposals = 0;
  #closed = false;

  constructor(
    private readonly driver: DatabaseDriver,
    readonly role: PoolRole,
    private readonly log: Logger,
    private readonly onDispose?: (event: DisposeEvent) => void,
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
    this.#pool ??= this.driver.createPool(this.role);
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
   * many callers failing on the same pool cause one rebuild, not a stampede.
   */
  async dispose(reason: string, observedGeneration = this.#generation): Promise<void> {
    if (observedGeneration !== this.#generation) return;
    const old = this.#pool;
    this.#pool = undefined;
    this.#generation += 1;
    this.#disposals += 1;
    const event = { role: this.role, reason, generation: this.#generation };
    this.log.warn('database pool disposed', event);
    this.onDispose?.(event);
    // Queries in flight on the old pool finish or fail on their own; ending waits for them.
    await old?.end().catch((err: unknown) => this.log.warn('disposed pool did not end cleanly', { err }));
  }

  /** Final: ends the pool for shutdown. */
  async close(): Promise<void> {
    this.#closed = true;
    const old = this.#pool;
    this.#pool = undefined;
    await old?.end();
  }
}
