// drizzle-kit's output (a journal and one SQL file per migration) as the TypeScript module the platform
// takes migrations in (`Migration[]` and the newest one's time): bundled, because a Worker cannot read
// files and a process should not depend on its working directory. Node only: it reads and writes files.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Migration, MigrationClass } from './migrate.js';
import { type SchemaSnapshot, schemaNeeds, schemaRemovals } from './schema-needs.js';

/** One drizzle-kit folder and the module `runMigrationsBundler` generates from it. */
export interface MigrationsBundle {
  /** The drizzle-kit `out` folder, relative to the root. */
  from: string;
  /** The generated module, relative to the root. */
  out: string;
  /** The script that writes it, named in its first line. */
  generatedBy: string;
  /** Where the module imports the `Migration` type from: `@honest-health/platform/db` by default. */
  typeFrom?: string;
  /** Its export names: `migrations`, `latestMigrationAt` and `schemaNeeds` by default. */
  names?: { migrations: string; latest: string; needs?: string };
  /** The doc comment on the newest migration's time. */
  latestComment?: string;
  /** Rewrites each statement as it is bundled; the SQL files, and so their hashes, stay as they are. */
  rewrite?: (statement: string) => string;
}

interface Journal {
  entries: { idx: number; tag: string; when: number }[];
}

const DEFAULT_NAMES = { migrations: 'migrations', latest: 'latestMigrationAt', needs: 'schemaNeeds' };
const DEFAULT_LATEST_COMMENT =
  'The newest bundled migration: all a runtime that only verifies the schema needs (Workers).';

/**
 * The migrations of a drizzle-kit `out` folder, in its journal's order, each with its class: the
 * `-- class:` line the SQL starts with, else the folder's baseline (`baseline.json`, for migrations
 * written before classes were), else none (a check treats it as a contract that may remove anything).
 * A contract's removals are what its snapshot lost against the one before, plus a `-- removes:` line.
 */
export function readMigrations(dir: string, rewrite: (statement: string) => string = (s) => s): Migration[] {
  const journal = readJournal(dir);
  const baseline = readBaseline(dir);
  return journal.entries.map(({ idx, tag, when }) => {
    const sql = readFileSync(join(dir, `${tag}.sql`), 'utf8');
    const header = readHeader(sql);
    const migrationClass = header.class ?? baseline[tag];
    const removes =
      migrationClass === 'contract'
        ? [...new Set([...snapshotRemovals(dir, idx), ...header.removes])].sort()
        : undefined;
    return {
      tag,
      // What drizzle-kit's own migrator records, so `drizzle-kit migrate` and the platform agree.
      hash: createHash('sha256').update(sql).digest('hex'),
      createdAt: when,
      ...(migrationClass ? { class: migrationClass } : {}),
      ...(removes ? { removes } : {}),
      statements: sql
        .split('--> statement-breakpoint')
        .map((s) => rewrite(s.trim()))
        .filter(Boolean),
    };
  });
}

/** Every column the folder's newest snapshot has: what a release built from it reads and writes. */
export function readSchemaNeeds(dir: string): string[] {
  const last = readJournal(dir).entries.at(-1);
  const snapshot = last === undefined ? undefined : readSnapshot(dir, last.idx);
  return snapshot ? schemaNeeds(snapshot) : [];
}

const readJournal = (dir: string) =>
  JSON.parse(readFileSync(join(dir, 'meta/_journal.json'), 'utf8')) as Journal;

// The folder's baseline (`baseline.json`, beside the journal's folder): the migrations applied before
// classes were written in the SQL, classified there because their files, and so their hashes, stay.
function readBaseline(dir: string): Record<string, MigrationClass> {
  const file = join(dir, 'baseline.json');
  if (!existsSync(file)) return {};
  const { migrations = {} } = JSON.parse(readFileSync(file, 'utf8')) as {
    migrations?: Record<string, { class?: unknown }>;
  };
  const classes: Record<string, MigrationClass> = {};
  for (const [tag, entry] of Object.entries(migrations)) {
    if (entry.class === 'expand' || entry.class === 'contract') classes[tag] = entry.class;
  }
  return classes;
}

/** The `-- class: expand|contract` and `-- removes: t.c, t` lines among the SQL's leading comments. */
export function readHeader(sql: string): { class?: MigrationClass; removes: string[] } {
  const header: { class?: MigrationClass; removes: string[] } = { removes: [] };
  for (const line of sql.split('\n')) {
    const comment = /^\s*--\s*(\w+)\s*:\s*(.*?)\s*$/.exec(line);
    if (!comment) {
      if (line.trim() === '' || line.trim().startsWith('--')) continue;
      break;
    }
    const [, key, value = ''] = comment;
    if (key === 'class' && (value === 'expand' || value === 'contract')) header.class = value;
    if (key === 'removes')
      header.removes.push(
        ...value
          .split(',')
          .map((v) => v.trim())
          .filter(Boolean),
      );
  }
  return header;
}

function readSnapshot(dir: string, idx: number): SchemaSnapshot | undefined {
  const file = join(dir, `meta/${String(idx).padStart(4, '0')}_snapshot.json`);
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as SchemaSnapshot) : undefined;
}

function snapshotRemovals(dir: string, idx: number): string[] {
  const before = idx > 0 ? readSnapshot(dir, idx - 1) : undefined;
  const after = readSnapshot(dir, idx);
  return before && after ? schemaRemovals(before, after) : [];
}

const latestOf = (migrations: readonly Migration[]) => migrations.at(-1)?.createdAt ?? 0;

/** The generated module's text. */
export function bundleSource(
  bundle: MigrationsBundle,
  migrations: readonly Migration[],
  needs: readonly string[] = [],
): string {
  const names = { ...DEFAULT_NAMES, ...bundle.names };
  return `// Generated by ${bundle.generatedBy} from ${bundle.from}/. Do not edit: run \`npm run db:bundle\`.
import type { Migration } from '${bundle.typeFrom ?? '@honest-health/platform/db'}';

export const ${names.migrations}: Migration[] = ${JSON.stringify(migrations, null, 2)};

/** ${bundle.latestComment ?? DEFAULT_LATEST_COMMENT} */
export const ${names.latest} = ${latestOf(migrations)};

/** Every column this release reads or writes: a contract migration that removes one of them stops it. */
export const ${names.needs}: readonly string[] = ${JSON.stringify(needs)};
`;
}

/** Options of `runMigrationsBundler`: the root, and whether only to check. */
export interface BundleOptions {
  /** What `from` and `out` are relative to. */
  root: string;
  /** Only compare: true when the module on disk holds these migrations. */
  check?: boolean;
}

/**
 * Writes a bundle, or with `check` reports whether the one on disk is current. The check compares
 * the data the module exports, not its text, so a formatter may touch the file; it imports the `.ts`
 * module, so it runs where TypeScript loads (tsx).
 */
export async function bundleMigrations(bundle: MigrationsBundle, options: BundleOptions): Promise<boolean> {
  const migrations = readMigrations(join(options.root, bundle.from), bundle.rewrite);
  const needs = readSchemaNeeds(join(options.root, bundle.from));
  const out = join(options.root, bundle.out);
  if (!options.check) {
    writeFileSync(out, bundleSource(bundle, migrations, needs));
    console.log(`wrote ${bundle.out} (${migrations.length} migrations)`);
    return true;
  }
  const names = { ...DEFAULT_NAMES, ...bundle.names };
  const current = (await import(pathToFileURL(out).href).catch(() => ({}))) as Record<string, unknown>;
  const same =
    JSON.stringify(current[names.migrations]) === JSON.stringify(migrations) &&
    current[names.latest] === latestOf(migrations) &&
    JSON.stringify(current[names.needs]) === JSON.stringify(needs);
  if (same) console.log(`${bundle.out} is up to date (${migrations.length} migrations)`);
  else console.error(`${bundle.out} is stale: run \`npm run db:bundle\` and commit it`);
  return same;
}

/**
 * `db:bundle` as a script: writes every bundle, or with `--check` among the arguments fails (exit
 * code 1) when one is stale.
 */
export async function runMigrationsBundler(
  bundles: readonly MigrationsBundle[],
  options: { root: string; argv?: readonly string[] },
): Promise<void> {
  const check = (options.argv ?? process.argv).includes('--check');
  let current = true;
  for (const bundle of bundles) {
    if (!(await bundleMigrations(bundle, { root: options.root, check }))) current = false;
  }
  if (!current) process.exitCode = 1;
}
