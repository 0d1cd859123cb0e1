// The module contract and what an app module is written with: its configuration, its logger, the
// database handle types it queries through, the error and metric shapes the platform serves.
export * from '../db/interval.js';
export * from '../db/poison.js';
export type { ProcessDatabase } from '../db/process-database.js';
export * from '../db/statements.js';
export * from '../db/types.js';
export * from '../http/error-body.js';
export * from '../http/hono.js';
export * from '../http/module.js';
export type { TickRun } from '../jobs/tick.js';
export * from '../metrics/registry.js';
export * from '../util/config.js';
export * from '../util/error-chain.js';
export * from '../util/identity.js';
export * from '../util/log.js';
export * from '../util/timeout.js';
export * from '../util/validate.js';
