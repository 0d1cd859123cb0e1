import { type AppEnv, errorBody } from '@honest-health/platform';
import { desc, eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { COUNT_WORDS } from './count-words.js';
import { notes } from './schema.js';

const MAX_BODY = 10_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const noteRoutes = () =>
  new Hono<AppEnv>()
    .post('/notes', async (c) => {
      const input = (await c.req.json().catch(() => undefined)) as { body?: unknown } | undefined;
      const body = typeof input?.body === 'string' ? input.body.trim() : '';
      if (body === '' || body.length > MAX_BODY) {
        return c.json(
          errorBody('invalid_request', `body must be a string of 1 to ${MAX_BODY} characters`),
          400,
        );
      }
      // The id is chosen before the first attempt, so the insert is idempotent and withDatabase may
      // run it again on a fresh pool after a failover: the note is stored once either way.
      const id = crypto.randomUUID();
      await c.var.withDatabase((db) => db.insert(notes).values({ id, body }).onConflictDoNothing());
      c.var.schedule(COUNT_WORDS);
      return c.json({ id, body, words: null }, 201);
    })
    .get('/notes', async (c) => {
      const rows = await c.var.withDatabase((db) =>
        db.select().from(notes).orderBy(desc(notes.createdAt)).limit(50),
      );
      return c.json({ notes: rows });
    })
    .get('/notes/:id', async (c) => {
      const id = c.req.param('id');
      const [note] = UUID.test(id)
        ? await c.var.withDatabase((db) => db.select().from(notes).where(eq(notes.id, id)))
        : [];
      return note ? c.json(note) : c.json(errorBody('not_found', 'no such note'), 404);
    });
