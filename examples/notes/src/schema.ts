import { sql } from 'drizzle-orm';
import { integer, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';

// TODO(platform tables): the write probe's and the tick runner's tables come in through the app's
// migrations until the platform applies its own; then this line and their CREATE TABLEs go.
export { healthHeartbeat, tickHealth } from '@honest-health/platform/schema';

export const notes = pgTable('notes', {
  id: uuid('id').primaryKey().default(sql`gen_random_uuid()`),
  body: text('body').notNull(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  // Filled by the count-words tick: null until it has seen the note.
  words: integer('words'),
});

export type Note = typeof notes.$inferSelect;
