// What a release reads and writes, and what a contract migration takes away, both named the same way:
// `table.column`, or `table` for a whole table. Derived from drizzle-kit's snapshots when migrations are
// bundled (migrations-bundle.ts); compared at boot on every runtime (schema-check.ts).

/** A drizzle-kit snapshot, as much of it as the comparison reads. */
export interface SchemaSnapshot {
  tables: Record<
    string,
    { name: string; columns: Record<string, { name: string; type: string; notNull?: boolean }> }
  >;
}

/** Every column of a snapshot, as `table.column`, sorted. */
export function schemaNeeds(snapshot: SchemaSnapshot): string[] {
  return Object.values(snapshot.tables)
    .flatMap((t) => Object.values(t.columns).map((c) => `${t.name}.${c.name}`))
    .sort();
}

/**
 * What a release built on `before` may use and `after` no longer offers as it was: a dropped (or
 * renamed) table or column, a column of another type, a column that turned NOT NULL (an older release's
 * inserts would fail on it).
 */
export function schemaRemovals(before: SchemaSnapshot, after: SchemaSnapshot): string[] {
  const removed: string[] = [];
  const afterTables = new Map(Object.values(after.tables).map((t) => [t.name, t]));
  for (const table of Object.values(before.tables)) {
    const next = afterTables.get(table.name);
    if (!next) {
      removed.push(table.name);
      continue;
    }
    const nextColumns = new Map(Object.values(next.columns).map((c) => [c.name, c]));
    for (const column of Object.values(table.columns)) {
      const now = nextColumns.get(column.name);
      const changed = !now || now.type !== column.type || (now.notNull === true && column.notNull !== true);
      if (changed) removed.push(`${table.name}.${column.name}`);
    }
  }
  return removed.sort();
}

/** The needs that `removes` takes away: a whole table takes every column of it. */
export function neededRemovals(removes: readonly string[], needs: readonly string[]): string[] {
  return removes.filter((r) => needs.some((n) => n === r || (!r.includes('.') && n.startsWith(`${r}.`))));
}
