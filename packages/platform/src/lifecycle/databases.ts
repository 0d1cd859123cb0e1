import { FailoverEpisodes } from '../db/episode.js';
import { DatabaseHandle } from '../db/handle.js';
import { WriteProbe } from '../db/probe.js';
import type { DatabaseDriver } from '../db/types.js';
import type { Logger } from '../util/log.js';
import type { Telemetry } from '../util/telemetry.js';

/**
 * The database parts over one driver: the app's pool, the probe's own, and the write probe. A process
 * builds them once; an isolate per request or cron invocation, over its own failover episode.
 */
export interface Databases {
  driver: DatabaseDriver;
  episodes: FailoverEpisodes;
  /** The application's pool, for requests, ticks and registries. */
  appDatabase: DatabaseHandle;
  probeDatabase: DatabaseHandle;
  writeProbe: WriteProbe;
  /** Ends the episode (unless it was given), both pools, then the driver. */
  close(): Promise<void>;
}

export interface DatabasesOptions {
  log: Logger;
  telemetry: Telemetry;
  probeTimeoutMs: number;
  instanceId: string;
  /** One that outlives these parts (an isolate's, across its requests); its owner closes it. */
  episodes?: FailoverEpisodes;
}

/** Builds the parts over a driver; nothing connects until the first query. */
export function createDatabases(driver: DatabaseDriver, options: DatabasesOptions): Databases {
  const { log, telemetry } = options;
  // One failover episode for both pools: one warning and one summary, however many see it.
  const episodes = options.episodes ?? new FailoverEpisodes(log);
  const appDatabase = new DatabaseHandle(driver, 'app', log, telemetry, episodes);
  const probeDatabase = new DatabaseHandle(driver, 'probe', log, telemetry, episodes);
  const writeProbe = new WriteProbe({
    probeDatabase,
    appDatabase,
    timeoutMs: options.probeTimeoutMs,
    instanceId: options.instanceId,
    log,
    telemetry,
  });
  return {
    driver,
    episodes,
    appDatabase,
    probeDatabase,
    writeProbe,
    close: async () => {
      if (!options.episodes) episodes.close();
      await Promise.allSettled([appDatabase.close(), probeDatabase.close()]);
      await driver.close();
    },
  };
}
