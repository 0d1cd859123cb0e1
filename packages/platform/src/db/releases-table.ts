import { bigint, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

// The releases that run on this database (releases.ts): one of the platform's own tables.
/** The releases that run on this database (releases.ts). */
export const platformReleases = pgTable('platform_releases', {
  releaseId: text('release_id').primaryKey(),
  runtime: text('runtime').notNull(),
  migrationAt: bigint('migration_at', { mode: 'number' }).notNull(),
  needs: jsonb('needs').$type<string[]>().notNull(),
  firstSeenAt: timestamp('first_seen_at', { withTimezone: true }).notNull().defaultNow(),
  lastSeenAt: timestamp('last_seen_at', { withTimezone: true }).notNull().defaultNow(),
});
