import { createHyperdriveDriver } from '../db/drivers/hyperdrive.js';
import { asHyperdriveBinding } from '../db/drivers/hyperdrive-binding.js';
import type { Config } from '../util/config.js';
import { ConfigError } from '../util/config.js';
import type { Logger } from '../util/log.js';
import type { Bindings, IsolateDatabase } from './worker-database.js';

/**
 * node-postgres through `[[hyperdrive]]` bindings. Hyperdrive caches read queries by default (up to
 * `max_age`, 60 s, plus `stale_while_revalidate`, 15 s: developers.cloudflare.com/hyperdrive/concepts/
 * query-caching/), so a read that decides something (an idempotent replay, a quota, what an API answers
 * right after a write) must not come from that cache. Cloudflare's way: "configure multiple Hyperdrive
 * connections from a single application: one connection that enables caching for popular queries, and
 * a second connection where you do not want to cache queries" (the same page; `wrangler hyperdrive
 * create ... --caching-disabled true`). So:
 *
 * - `<binding>_UNCACHED` (HYPERDRIVE_UNCACHED), a configuration with caching disabled, carries every
 *   write and every deciding read: the app's requests and ticks, the boot's checks, the probe;
 * - `<binding>` (HYPERDRIVE) carries only the reads where staleness is harmless (the app's gauges on a
 *   `/metrics` scrape), when both are bound.
 *
 * With only `<binding>` bound everything goes through it, and the isolate warns at boot: its caching
 * must then be disabled. Present, a binding wins over DATABASE_URL, which is left to `npm run
 * db:migrate` (it runs outside the Worker).
 *
 * @example
 * ```ts
 * // wrangler.toml: [[hyperdrive]] binding = "HYPERDRIVE_UNCACHED" (caching disabled), and
 * //                [[hyperdrive]] binding = "HYPERDRIVE"
 * export default createIsolateHandlers(app, { databases: [hyperdriveIsolateDatabase()] });
 * ```
 */
export function hyperdriveIsolateDatabase(
  binding = 'HYPERDRIVE',
  uncached = `${binding}_UNCACHED`,
): IsolateDatabase {
  const deciding = (bindings: Bindings) =>
    asHyperdriveBinding(bindings[uncached]) ?? asHyperdriveBinding(bindings[binding]);
  const driver = (connectionString: string, poolMax: number, config: Config, log: Logger) =>
    createHyperdriveDriver({ connectionString, poolMax, probeTimeoutMs: config.probeTimeoutMs, log });
  return {
    name: 'hyperdrive',
    detect(bindings) {
      const hyperdrive = deciding(bindings);
      // The URL only satisfies the configuration's checks; the driver reads the binding per invocation.
      return hyperdrive
        ? { overrides: { DATABASE_DRIVER: 'pg', DATABASE_URL: hyperdrive.connectionString } }
        : undefined;
    },
    createDriver(config, bindings, log) {
      const hyperdrive = deciding(bindings);
      if (!hyperdrive)
        throw new ConfigError([`the ${uncached} (or ${binding}) Hyperdrive binding is missing`]);
      return driver(hyperdrive.connectionString, config.poolMax, config, log);
    },
    createCachedDriver(config, bindings, log) {
      const cached = asHyperdriveBinding(bindings[binding]);
      if (!cached || !asHyperdriveBinding(bindings[uncached])) return undefined;
      // One connection: a scrape's harmless reads, beside the request's own pools (a Worker may hold 6).
      return driver(cached.connectionString, 1, config, log);
    },
    warnings(bindings) {
      if (asHyperdriveBinding(bindings[uncached])) return [];
      return [
        `${uncached} is not bound: every read, deciding ones too, goes through ${binding}; disable its query caching, or bind a second configuration with caching disabled as ${uncached}`,
      ];
    },
  };
}
