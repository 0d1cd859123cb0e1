// What `npm run db:generate` does after drizzle-kit generate: each migration it just wrote (no class
// header, not in the baseline) is rewritten so the lint passes it where a safe rewrite exists:
// - the class header, derived from drizzle-kit's snapshots (anything removed, renamed, retyped or made
//   NOT NULL is a contract, else an expand);
// - an index built or dropped on a table that existed before becomes CONCURRENTLY and IF [NOT] EXISTS,
//   moved to a migration of its own: the migrator runs those one by one outside a transaction;
// - a foreign key or CHECK added to a table that existed before gets NOT VALID, and its VALIDATE goes to
//   a later migration of its own: in the same transaction the scan would hold the ADD's lock.
// A split adds journal entries (later `when`s) and snapshot copies, so drizzle-kit's next diff still
// starts from the newest snapshot. What has no safe rewrite (a volatile default, a UNIQUE constraint, a
// drop in an expand) stays as written, for the lint to name its fix.
import { randomUUID } from 'node:crypto';
import { readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import {
  BREAKPOINT,
  chunksOf,
  classOf,
  type JournalEntry,
  journalPath,
  type MigrationClass,
  prefixOf,
  readBaseline,
  readJournal,
  snapshotPath,
  sqlPath,
  statementOf,
  withHeader,
} from './folder.js';

interface SnapshotColumn {
  name: string;
  type: string;
  notNull: boolean;
  default?: unknown;
}

interface SnapshotTable {
  name: string;
  schema: string;
  columns: Record<string, SnapshotColumn>;
}

/** The parts of a drizzle-kit (v7, postgresql) snapshot read here; the rest is copied as it is. */
export interface Snapshot {
  id: string;
  prevId: string;
  tables: Record<string, SnapshotTable>;
  enums?: Record<string, { name: string; values: string[] }>;
  [key: string]: unknown;
}

export interface DerivedClass {
  cls: MigrationClass;
  /** What makes it a contract, one phrase each. */
  reasons: string[];
}

/** Contract when the new snapshot removes or changes what the previous one had; expand otherwise. */
export function deriveClass(prev: Snapshot | undefined, cur: Snapshot): DerivedClass {
  const reasons: string[] = [];
  for (const [key, table] of Object.entries(prev?.tables ?? {})) {
    const now = cur.tables[key];
    if (!now) {
      reasons.push(`table ${key} removed or renamed`);
      continue;
    }
    for (const [name, column] of Object.entries(table.columns)) {
      const next = now.columns[name];
      if (!next) reasons.push(`column ${table.name}.${name} removed or renamed`);
      else if (next.type !== column.type) reasons.push(`column ${table.name}.${name} retyped`);
      else if (next.notNull && !column.notNull) reasons.push(`column ${table.name}.${name} made NOT NULL`);
      else if (next.notNull && column.default !== undefined && next.default === undefined)
        reasons.push(
          `column ${table.name}.${name} lost its default (the running release inserts without it)`,
        );
    }
  }
  for (const [key, en] of Object.entries(prev?.enums ?? {})) {
    const now = cur.enums?.[key];
    if (!now) reasons.push(`enum ${key} removed or renamed`);
    else for (const v of en.values) if (!now.values.includes(v)) reasons.push(`enum ${key} lost '${v}'`);
  }
  return { cls: reasons.length > 0 ? 'contract' : 'expand', reasons };
}

const NAME = String.raw`(?:"[^"]+"|[A-Za-z_][\w$]*)`;
const TABLE = String.raw`(${NAME}(?:\.${NAME})?)`;
const CREATE_INDEX = new RegExp(
  String.raw`^CREATE\s+(UNIQUE\s+)?INDEX\s+(?:CONCURRENTLY\s+)?(?:IF\s+NOT\s+EXISTS\s+)?${NAME}\s+ON\s+(?:ONLY\s+)?${TABLE}`,
  'i',
);
const DROP_INDEX = /^DROP\s+INDEX\s+(?:CONCURRENTLY\s+)?(?:IF\s+EXISTS\s+)?/i;
const ADD_CONSTRAINT = new RegExp(
  String.raw`^ALTER\s+TABLE\s+(?:ONLY\s+)?${TABLE}\s+ADD\s+CONSTRAINT\s+(${NAME})\s+(?:FOREIGN\s+KEY|CHECK)\b`,
  'i',
);

/** A table reference as a snapshot keys it: `schema.name`, public when unqualified. */
function tableKey(ref: string): string {
  const parts = ref.match(new RegExp(NAME, 'g')) ?? [];
  const unquote = (p: string) => (p.startsWith('"') ? p.slice(1, -1) : p.toLowerCase());
  const [a, b] = parts.map(unquote);
  return b === undefined ? `public.${a}` : `${a}.${b}`;
}

export interface SplitMigration {
  /** The tag without its index prefix. */
  name: string;
  cls: MigrationClass;
  sql: string;
  /** What was moved or rewritten, for the author. */
  notes: string[];
}

const joinStatements = (statements: readonly string[]) => statements.join(`${BREAKPOINT}\n`);

/** One generated migration as the migrations it becomes: itself, then its index builds, then its VALIDATEs. */
export function splitMigration(
  name: string,
  sql: string,
  prev: Snapshot | undefined,
  cur: Snapshot,
): SplitMigration[] {
  const existed = (ref: string) => prev?.tables[tableKey(ref)] !== undefined;
  const main: string[] = [];
  const indexes: string[] = [];
  const validates: string[] = [];
  for (const chunk of chunksOf(sql)) {
    const statement = statementOf(chunk.text);
    if (statement === '') {
      // A comment alone (drizzle-kit generate --custom writes one) stays for the author.
      if (chunk.text.trim() !== '') main.push(chunk.text.trim());
      continue;
    }
    const create = CREATE_INDEX.exec(statement);
    const add = ADD_CONSTRAINT.exec(statement);
    if (create?.[2] !== undefined && existed(create[2])) {
      indexes.push(
        statement.replace(
          /^CREATE\s+(UNIQUE\s+)?INDEX\s+(?:CONCURRENTLY\s+)?(?:IF\s+NOT\s+EXISTS\s+)?/i,
          (_, unique?: string) => `CREATE ${unique ? 'UNIQUE ' : ''}INDEX CONCURRENTLY IF NOT EXISTS `,
        ),
      );
    } else if (DROP_INDEX.test(statement)) {
      indexes.push(statement.replace(DROP_INDEX, 'DROP INDEX CONCURRENTLY IF EXISTS '));
    } else if (
      add?.[1] !== undefined &&
      add[2] !== undefined &&
      existed(add[1]) &&
      !/\bNOT\s+VALID\b/i.test(statement)
    ) {
      main.push(`${statement.replace(/;\s*$/, '')} NOT VALID;`);
      validates.push(`ALTER TABLE ${add[1]} VALIDATE CONSTRAINT ${add[2]};`);
    } else {
      // Untouched: drizzle-kit's text as it wrote it, its leading newline included.
      main.push(chunk.text.replace(/^\n/, ''));
    }
  }
  const derived = deriveClass(prev, cur);
  const out: SplitMigration[] = [];
  if (main.length > 0 || (indexes.length === 0 && validates.length === 0)) {
    out.push({
      name,
      cls: derived.cls,
      sql: withHeader(derived.cls, joinStatements(main)),
      notes: derived.reasons.length > 0 ? [`contract: ${derived.reasons.join('; ')}`] : [],
    });
  }
  if (indexes.length > 0) {
    out.push({
      name: out.length === 0 ? name : `${name}_indexes`,
      cls: 'expand',
      sql: withHeader('expand', joinStatements(indexes)),
      notes: [
        `${indexes.length} index statement(s) on existing tables made CONCURRENTLY, alone in this migration (run outside a transaction)`,
      ],
    });
  }
  if (validates.length > 0) {
    out.push({
      name: `${name}_validate`,
      cls: 'expand',
      sql: withHeader('expand', joinStatements(validates)),
      notes: [
        `${validates.length} constraint(s) added NOT VALID, validated here in a transaction of its own`,
      ],
    });
  }
  return out;
}

export interface Prepared {
  tag: string;
  cls: MigrationClass;
  notes: string[];
}

const readSnapshot = (dir: string, idx: number) =>
  JSON.parse(readFileSync(snapshotPath(dir, idx), 'utf8')) as Snapshot;

/**
 * Rewrites the folder's unprepared migrations (those after the last one with a class header or in the
 * baseline) in place, renumbering the ones a split pushes later. Reads everything before writing
 * anything; returns what it wrote, nothing when every migration is prepared.
 */
export function prepareMigrations(dir: string): Prepared[] {
  const journal = readJournal(dir);
  const baseline = readBaseline(dir);
  const prepared = (e: JournalEntry) =>
    baseline.migrations[e.tag] !== undefined ||
    classOf(readFileSync(sqlPath(dir, e.tag), 'utf8')) !== undefined;
  const first = journal.entries.findIndex((e) => !prepared(e));
  if (first < 0) return [];
  const tail = journal.entries.slice(first);
  for (const e of tail) {
    if (prepared(e))
      throw new Error(
        `${e.tag} has a class header but follows ${journal.entries[first]?.tag}, which has none: add its header by hand`,
      );
    if (!/^\d{4}_/.test(e.tag))
      throw new Error(`${e.tag}: only drizzle-kit's default prefix (0000_) is supported`);
    if (!e.breakpoints)
      throw new Error(`${e.tag}: written without statement breakpoints; set breakpoints: true`);
  }

  const before = first > 0 ? journal.entries[first - 1] : undefined;
  let prev = before ? readSnapshot(dir, before.idx) : undefined;
  const planned: { split: SplitMigration; snapshot: Snapshot; own: boolean; when: number }[] = [];
  for (const e of tail) {
    const cur = readSnapshot(dir, e.idx);
    const splits = splitMigration(e.tag.slice(5), readFileSync(sqlPath(dir, e.tag), 'utf8'), prev, cur);
    splits.forEach((split, i) => {
      planned.push({ split, snapshot: cur, own: i === 0, when: e.when });
    });
    prev = cur;
  }

  for (const e of tail) {
    unlinkSync(sqlPath(dir, e.tag));
    unlinkSync(snapshotPath(dir, e.idx));
  }
  const entries = journal.entries.slice(0, first);
  let idx = tail[0]?.idx ?? 0;
  let lastWhen = before?.when ?? 0;
  let prevId: string | undefined = before ? readSnapshot(dir, before.idx).id : undefined;
  const written: Prepared[] = [];
  for (const { split, snapshot, own, when } of planned) {
    const tag = `${prefixOf(idx)}_${split.name}`;
    // The first migration of a generated one keeps drizzle-kit's snapshot id; copies get their own,
    // and each points at the one before: drizzle-kit refuses two snapshots with one parent.
    const copy: Snapshot = {
      ...snapshot,
      id: own ? snapshot.id : randomUUID(),
      prevId: prevId ?? snapshot.prevId,
    };
    const at = Math.max(when, lastWhen + 1);
    writeFileSync(sqlPath(dir, tag), split.sql);
    writeFileSync(snapshotPath(dir, idx), JSON.stringify(copy, null, 2));
    entries.push({ idx, version: journal.version, when: at, tag, breakpoints: true });
    written.push({ tag, cls: split.cls, notes: split.notes });
    prevId = copy.id;
    lastWhen = at;
    idx += 1;
  }
  writeFileSync(journalPath(dir), JSON.stringify({ ...journal, entries }, null, 2));
  return written;
}
