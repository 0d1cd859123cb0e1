import { type SQL, sql } from 'drizzle-orm';

/**
 * `ms` milliseconds as a Postgres interval, for `now() + ...` arithmetic in queries. The amount is
 * bound as a parameter ('60000 milliseconds'::interval), never spliced into the query text.
 *
 * @example
 * ```ts
 * await db.execute(sql`UPDATE carts SET expires_at = now() + ${interval(config.cartTtlMs)} WHERE id = ${id}`);
 * ```
 */
export function interval(ms: number): SQL {
  return sql`${`${Math.round(ms)} milliseconds`}::interval`;
}
