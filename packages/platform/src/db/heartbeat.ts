import { bigint, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

// The readiness probe's table. It lives in the platform (the probe writes it) and the application
// schema re-exports it so that drizzle-kit generates its migration with the rest.
export const healthHeartbeat = pgTable('health_heartbeat', {
  instanceId: text('instance_id').primaryKey(),
  beatAt: timestamp('beat_at', { withTimezone: true }).notNull().defaultNow(),
  // Counts probe writes: lets a test (and an operator) see how often the probe really hit Postgres.
  beats: bigint('beats', { mode: 'number' }).notNull().default(1),
});
