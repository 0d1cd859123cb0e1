// Migrations applied at deploy, outside any lifecycle: where the runtime cannot migrate at boot
// (Workers only check the schema). Over a session, since the migration's transaction holds the
// advisory lock. Node only: a deploy pipeline runs it.
import type { Config } from '../util/config.js';
import type { Logger } from '../util/log.js';
import { createDriver, type DriverOptions } from './driver.js';
import { type Migration, migrate } from './migrate.js';
import { expireReleases } from './releases.js';

/** What `migrateAtDeploy` applied, and the newest bundled migration. */
export interface DeployMigrateResult {
  /** The tags applied now, the platform's first; empty when the schema was current. */
  applied: string[];
  /** The app's newest bundled migration. */
  latest: string | undefined;
}

/** Opens the configured database among those offered, applies what is pending, and closes it. */
export async function migrateAtDeploy(
  config: Config,
  log: Logger,
  options: DriverOptions & {
    migrations: readonly Migration[];
    /** Applies a contract even though a running release needs what it removes. */
    allowContract?: boolean;
  },
): Promise<DeployMigrateResult> {
  const driver = createDriver(config, log, options);
  try {
    await driver.ready();
    const pool = driver.createPool('app');
    try {
      const { applied } = await migrate(pool, options.migrations, log, {
        timeoutMs: config.migrationLockTimeoutMs,
        lockAttemptMs: config.migrationLockAttemptMs,
        releaseWindowMs: config.releaseWindowMs,
        ...(options.allowContract ? { allowContract: true } : {}),
      });
      await expireReleases(pool);
      return { applied, latest: options.migrations.at(-1)?.tag };
    } finally {
      await pool.end();
    }
  } finally {
    await driver.close();
  }
}
