// `@honest-health/platform/middleware`: the write probe and dispose-and-retry-once for an app that
// keeps its own entry, as Hono middleware and plain functions (the rest of the platform not needed).

export { DatabaseHandle } from '../db/handle.js';
export { DatabaseUnavailableError } from '../db/poison-retry.js';
export type { DatabaseStatus, ProbeResult, ReplicationSettings } from '../db/probe.js';
export {
  createDatabaseHealth,
  type DatabaseHealth,
  type DatabaseHealthOptions,
  type DatabaseVariables,
  databaseMiddleware,
  databaseUnavailableResponse,
  type ReadinessOptions,
  readinessHandler,
  type WithDatabaseOptions,
} from '../http/middleware.js';
