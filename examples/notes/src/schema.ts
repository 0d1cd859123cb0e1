import { sql } from 'drizzle-orm';
import { integer, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';

// The app's only table. The platform's own (the write probe's health_heartbeat, tick_health) are
// migrated by the platform, before these, so they are not in this schema or its migrations.
export const notes = pgTable('notes', {
  id: uuid('id').primaryKey().default(sql`gen_random_uuid()`),
  body: text('body').notNull(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  // Filled by the count-words tick: null until it has seen the note.
  words: integer('words'),
});

export type Note = typeof notes.$inferSelect;
