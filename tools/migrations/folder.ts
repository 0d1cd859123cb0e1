// A drizzle-kit migrations folder as the lint and the db:generate post-processor read it: the journal,
// the SQL files, the snapshots, each migration's class header and the folder's baseline.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The two folders of this repository, relative to its root. */
export const MIGRATION_FOLDERS = ['drizzle', 'packages/platform/drizzle'] as const;

export type MigrationClass = 'expand' | 'contract';

/** drizzle-kit's statement separator; it writes it as BREAKPOINT + '\n' between statements. */
export const BREAKPOINT = '--> statement-breakpoint';

export interface JournalEntry {
  idx: number;
  version: string;
  when: number;
  tag: string;
  breakpoints: boolean;
}

export interface Journal {
  version: string;
  dialect: string;
  entries: JournalEntry[];
}

export interface BaselineEntry {
  class: MigrationClass;
  sha256: string;
  note?: string;
}

/** Migrations written before classes existed: classified here, skipped by the lint, never rewritten. */
export interface Baseline {
  why: string;
  migrations: Record<string, BaselineEntry>;
}

export const BASELINE_FILE = 'baseline.json';

export const journalPath = (dir: string) => join(dir, 'meta/_journal.json');
export const sqlPath = (dir: string, tag: string) => join(dir, `${tag}.sql`);
/** drizzle-kit names a snapshot by its migration's index prefix, not by its tag. */
export const snapshotPath = (dir: string, idx: number) => join(dir, `meta/${prefixOf(idx)}_snapshot.json`);
export const prefixOf = (idx: number) => String(idx).padStart(4, '0');

export function readJournal(dir: string): Journal {
  return JSON.parse(readFileSync(journalPath(dir), 'utf8')) as Journal;
}

export function readBaseline(dir: string): Baseline {
  const path = join(dir, BASELINE_FILE);
  if (!existsSync(path)) return { why: '', migrations: {} };
  return JSON.parse(readFileSync(path, 'utf8')) as Baseline;
}

export const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

const HEADER = /^-- class: *(\S*) *$/;

/** The first line's class: a class, `invalid` for a header naming something else, undefined for none. */
export function classOf(sql: string): MigrationClass | 'invalid' | undefined {
  const first = sql.split('\n', 1)[0] ?? '';
  const match = HEADER.exec(first.trimEnd());
  if (!match) return undefined;
  return match[1] === 'expand' || match[1] === 'contract' ? match[1] : 'invalid';
}

export const withHeader = (cls: MigrationClass, sql: string) => `-- class: ${cls}\n${sql}`;

export interface Chunk {
  /** The statement as written, comments included, without the separator. */
  text: string;
  /** 1-based line of the chunk's first character in the file. */
  line: number;
}

/** The file cut at drizzle-kit's separators, as the migrator cuts it. */
export function chunksOf(sql: string): Chunk[] {
  const chunks: Chunk[] = [];
  let line = 1;
  for (const text of sql.split(BREAKPOINT)) {
    chunks.push({ text, line });
    line += text.split('\n').length - 1;
  }
  return chunks;
}

/** A chunk without its comment lines and surrounding space: what to match a statement against. */
export function statementOf(chunk: string): string {
  return chunk
    .split('\n')
    .filter((l) => !l.trimStart().startsWith('--'))
    .join('\n')
    .trim();
}

/** The line of the statement itself, past the chunk's leading comments and blank lines. */
export function statementLine(chunk: Chunk): number {
  const lines = chunk.text.split('\n');
  const first = lines.findIndex((l) => l.trim() !== '' && !l.trimStart().startsWith('--'));
  return chunk.line + Math.max(first, 0);
}

export const CONCURRENTLY = /\bCONCURRENTLY\b/i;
/** The only statements a migration run outside a transaction may hold: idempotent index builds and drops. */
export const CONCURRENT_INDEX =
  /^(CREATE\s+(UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS|DROP\s+INDEX\s+CONCURRENTLY\s+IF\s+EXISTS)\s[^;]*;?$/i;
