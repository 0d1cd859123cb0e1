import { validate } from '@honest-health/platform';
import { coerce, int, maximum, minimum, optional, type output, string, type ZodMiniObject } from 'zod/mini';
import { ApiError } from './errors.js';
import { fieldErrors } from './invoices/input.js';
import { decodeCursor, encodeCursor } from './invoices/view.js';

// Keyset pages, one shape for every list: `limit` (1 to MAX_PAGE, DEFAULT_PAGE when absent) and an
// opaque `cursor` naming the last row seen, `(created_at, id)`; the answer's `nextCursor`, null on the
// last page. A bad parameter is a 400 naming it.

export const DEFAULT_PAGE = 50;
export const MAX_PAGE = 200;

/** The query fields of a page, for a list's strictObject. */
export const pageFields = {
  cursor: optional(string()),
  limit: optional(
    coerce
      .number({ error: () => `must be an integer from 1 to ${MAX_PAGE}` })
      .check(int(), minimum(1), maximum(MAX_PAGE)),
  ),
};

/** The query read by `schema` (with pageFields), its limit defaulted and its cursor decoded, or a 400. */
export function readPageQuery<S extends ZodMiniObject<typeof pageFields>>(
  schema: S,
  query: Record<string, string>,
): output<S> & { limit: number; after: { at: string; id: string } | undefined } {
  const parsed = validate(schema, query);
  if (!parsed.success)
    throw new ApiError(400, 'invalid_query', 'the query is not valid', fieldErrors(parsed.error));
  const data = parsed.data as output<S>;
  const after = data.cursor === undefined ? undefined : decodeCursor(data.cursor);
  if (data.cursor !== undefined && !after) {
    throw new ApiError(400, 'invalid_query', 'the query is not valid', [
      { path: 'cursor', message: 'is not a cursor from this API' },
    ]);
  }
  return { ...data, limit: data.limit ?? DEFAULT_PAGE, after };
}

/** A page from `limit + 1` rows (the extra one tells another page exists, without a count query). */
export function pageOf<R extends { cursorAt: string; id: string }>(rows: R[], limit: number) {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return { page, nextCursor: rows.length > limit && last ? encodeCursor(last) : null };
}
