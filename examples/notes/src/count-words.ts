import type { AppTick, Database } from '@honest-health/platform';
import { isNull, sql } from 'drizzle-orm';
import { notes } from './schema.js';

export const COUNT_WORDS = 'count-words';

/**
 * The app's one tick: fills `words` for the notes that have none yet. One UPDATE, so a run the
 * platform retries after a failover (or two replicas' runs) count each note once.
 */
export const countWords = (intervalMs: number): AppTick => ({
  name: COUNT_WORDS,
  intervalMs,
  run: async (db: Database) => {
    const counted = await db
      .update(notes)
      .set({
        words: sql`coalesce(array_length(regexp_split_to_array(btrim(${notes.body}), '[[:space:]]+'), 1), 0)`,
      })
      .where(isNull(notes.words))
      .returning({ id: notes.id });
    return { counted: counted.length };
  },
});
