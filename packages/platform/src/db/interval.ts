import { type SQL, sql } from 'drizzle-orm';

/**
 * `ms` milliseconds as a Postgres interval, for `now() + ...` arithmetic in queries. The amount is
 * bound as a parameter ('60000 milliseconds'::interval), never spliced into the query text.
 */
export function interval(ms: number): SQL {
  return sql`${`${Math.round(ms)} milliseconds`}::interval`;
}
