import { type Config, ConfigError, type DatabaseConfig } from '../util/config.js';
import type { Identity } from '../util/identity.js';
import type { Logger } from '../util/log.js';
import type { DatabaseDriver } from './types.js';

/**
 * How a process (Node, Bun) or a tool reaches its database: one per driver, in its own module
 * (`@honest-health/platform/drivers/pg`, `/neon`, `/pglite`), so a bundle carries only the drivers its
 * entry imports and offers.
 */
export interface ProcessDatabase {
  readonly name: string;
  /** The DATABASE_DRIVER values it serves (`auto` resolves to `pglite` without a URL, `pg` with one). */
  readonly serves: readonly DatabaseConfig['driver'][];
  createDriver(config: Config, log: Logger, identity: Identity): DatabaseDriver;
}

/** The offered database that serves the configured driver; a ConfigError when none does. */
export function chooseProcessDatabase(offered: readonly ProcessDatabase[], config: Config): ProcessDatabase {
  const { driver } = config.database;
  const chosen = offered.find((d) => d.serves.includes(driver));
  if (chosen) return chosen;
  const names = offered.map((d) => d.name).join(', ') || 'none';
  throw new ConfigError([`DATABASE_DRIVER ${driver} is not one this entry offers (${names})`]);
}
