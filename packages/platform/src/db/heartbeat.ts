import { bigint, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * The readiness probe's table, one of the platform's own (packages/platform/drizzle/, applied by
 * migrate() before the app's).
 */
export const healthHeartbeat = pgTable('health_heartbeat', {
  instanceId: text('instance_id').primaryKey(),
  beatAt: timestamp('beat_at', { withTimezone: true }).notNull().defaultNow(),
  // Counts probe writes: lets a test (and an operator) see how often the probe really hit Postgres.
  beats: bigint('beats', { mode: 'number' }).notNull().default(1),
});
