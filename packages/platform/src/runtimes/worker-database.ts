import type { DatabaseDriver } from '../db/types.js';
import type { Config, Env } from '../util/config.js';
import type { Logger } from '../util/log.js';

/** A Worker's bindings: strings (vars, secrets) and objects (Hyperdrive, KV, ...). */
export type Bindings = Record<string, unknown>;

/**
 * How an isolate reaches its database. The Worker entry passes the ones it bundles, in order of
 * precedence: the first whose bindings are present is used. Each lives in its own module, so a
 * bundle carries only the drivers its entry imports.
 */
export interface IsolateDatabase {
  readonly name: string;
  /**
   * Undefined when this database's bindings are absent. Otherwise the configuration it implies:
   * `defaults` under the Worker's own vars, `overrides` over them.
   */
  detect(bindings: Bindings): { defaults?: Env; overrides?: Env } | undefined;
  /** A driver for one request or cron invocation: a Worker's sockets belong to the request that opened them. */
  createDriver(config: Config, bindings: Bindings, log: Logger): DatabaseDriver;
  /**
   * A driver whose reads a query cache may answer (stale by up to the cache's age), for the reads where
   * that is harmless; undefined when this database has none (then those reads take createDriver's).
   * Everything that decides something (every write, the app's requests and ticks, the boot's checks)
   * takes createDriver's.
   */
  createCachedDriver?(config: Config, bindings: Bindings, log: Logger): DatabaseDriver | undefined;
  /** What the isolate logs as warnings at its first boot about how these bindings are set up. */
  warnings?(bindings: Bindings): string[];
}
