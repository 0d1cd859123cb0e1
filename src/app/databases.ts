import type { Config, Logger, ProcessDatabase } from '@honest-health/platform';
import { createDriver } from '@honest-health/platform/db';
import { neonDatabase } from '@honest-health/platform/drivers/neon';
import { pgDatabase } from '@honest-health/platform/drivers/pg';
import { pgliteDatabase } from '@honest-health/platform/drivers/pglite';
import { identity } from './identity.js';

/**
 * The databases honest-health's processes (Node, Bun) and tools reach: the embedded PGlite without a
 * DATABASE_URL, node-postgres with one, Neon's serverless driver when DATABASE_DRIVER says neon-ws or
 * neon-http. Workers choose theirs in their entries (src/runtime/worker*.ts).
 */
export const processDatabases: readonly ProcessDatabase[] = [pgliteDatabase, pgDatabase, neonDatabase];

/** A driver for the configured database, as the app's tools (and tests) open it. */
export const openDriver = (config: Config, log: Logger) =>
  createDriver(config, log, { databases: processDatabases, identity });
