// `@honest-health/platform/schema`: the platform's own tables, as Drizzle schema.
export { healthHeartbeat } from '../db/heartbeat.js';
export { platformReleases } from '../db/releases-table.js';
export { tickHealth } from '../jobs/tick-health-table.js';
