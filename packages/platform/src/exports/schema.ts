// The platform's own tables, as Drizzle schema.
export * from '../db/heartbeat.js';
export * from '../db/releases-table.js';
export * from '../jobs/tick-health-table.js';
