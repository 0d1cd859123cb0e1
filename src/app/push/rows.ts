/** The rows of db.execute, which every driver (node-postgres, Neon, PGlite) returns as `{ rows }`. */
export function rowsOf<T>(result: unknown): T[] {
  const rows = (result as { rows?: unknown } | null)?.rows;
  if (!Array.isArray(rows)) throw new Error('the driver returned no rows array');
  return rows as T[];
}
