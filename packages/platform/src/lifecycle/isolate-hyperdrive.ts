import { createHyperdriveDriver } from '../db/drivers/hyperdrive.js';
import { asHyperdriveBinding } from '../db/drivers/hyperdrive-binding.js';
import { ConfigError } from '../util/config.js';
import type { IsolateDatabase } from './isolate-database.js';

/**
 * node-postgres through a `[[hyperdrive]]` binding (HYPERDRIVE unless named otherwise). Present, it
 * wins over DATABASE_URL: the Worker reaches Postgres through the binding only, and DATABASE_URL is
 * left to `npm run db:migrate`, which runs outside the Worker.
 *
 * @example
 * ```ts
 * // wrangler.toml: [[hyperdrive]] binding = "HYPERDRIVE"
 * export default createIsolateHandlers(app, { databases: [hyperdriveIsolateDatabase()] });
 * ```
 */
export function hyperdriveIsolateDatabase(binding = 'HYPERDRIVE'): IsolateDatabase {
  return {
    name: 'hyperdrive',
    detect(bindings) {
      const hyperdrive = asHyperdriveBinding(bindings[binding]);
      // The URL only satisfies the configuration's checks; the driver reads the binding per invocation.
      return hyperdrive
        ? { overrides: { DATABASE_DRIVER: 'pg', DATABASE_URL: hyperdrive.connectionString } }
        : undefined;
    },
    createDriver(config, bindings, log) {
      const hyperdrive = asHyperdriveBinding(bindings[binding]);
      if (!hyperdrive) throw new ConfigError([`the ${binding} Hyperdrive binding is missing`]);
      return createHyperdriveDriver({
        connectionString: hyperdrive.connectionString,
        poolMax: config.poolMax,
        probeTimeoutMs: config.probeTimeoutMs,
        log,
      });
    },
  };
}
