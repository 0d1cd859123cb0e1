// The migration lint: squawk's rules on every migration outside a folder's baseline, plus what squawk
// lacks (the class header, a class the SQL contradicts, CONCURRENTLY statements kept alone). Each
// finding names its file, line, rule and the exact fix.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import {
  BASELINE_FILE,
  CONCURRENT_INDEX,
  CONCURRENTLY,
  chunksOf,
  classOf,
  type MigrationClass,
  readBaseline,
  readJournal,
  sha256,
  sqlPath,
  statementLine,
  statementOf,
} from './folder.js';

export interface Finding {
  /** Relative to the root the lint ran from. */
  file: string;
  line?: number;
  rule: string;
  message: string;
  fix: string;
}

export const formatFinding = (f: Finding) =>
  `${f.file}${f.line ? `:${f.line}` : ''}: ${f.rule}: ${f.message} Fix: ${f.fix}`;

/** squawk rules a contract may break: it exists to remove or change what no running release uses. */
const CONTRACT_ONLY = new Set(['ban-drop-column', 'ban-drop-table', 'renaming-column', 'renaming-table']);

const NEW_MIGRATION = 'its own migration (npm run db:generate splits it out)';
const SPLIT_VALIDATE =
  'ADD CONSTRAINT ... NOT VALID here, and ALTER TABLE ... VALIDATE CONSTRAINT ... in a later migration of its own: validated in the same transaction, the scan holds the lock the NOT VALID avoided';

/** The exact fix per squawk rule; a rule not named here gets squawk's own help. */
const FIXES: Record<string, (cls: MigrationClass | undefined) => string> = {
  'ban-drop-column': () =>
    'drop the column in a contract migration of its own, in a release after the one that stopped reading and writing it.',
  'ban-drop-table': () =>
    'drop the table in a contract migration of its own, in a release after the one that stopped reading and writing it.',
  'renaming-column': () =>
    'add the new column in an expand, write both and backfill; drop the old one in a later contract.',
  'renaming-table': () =>
    'create the new table in an expand, write both and backfill; drop the old one in a later contract.',
  'changing-column-type': () =>
    'add a column of the new type in an expand, write both and backfill, then drop the old one in a later contract (a type change rewrites the table under ACCESS EXCLUSIVE).',
  'adding-not-nullable-field': (cls) =>
    cls === 'contract'
      ? 'VALIDATE a CHECK ("col" IS NOT NULL) in an earlier migration (Postgres then skips the scan), and put "-- squawk-ignore adding-not-nullable-field" on the line above the SET NOT NULL.'
      : 'a running release may still write NULL: add CHECK ("col" IS NOT NULL) NOT VALID in this expand, VALIDATE it in a migration of its own, and SET NOT NULL in a later contract.',
  'adding-required-field': () =>
    'add the column nullable, or with a constant DEFAULT: the running release inserts rows without it.',
  'adding-field-with-default': () =>
    'add the column with no default (or a constant one), then ALTER COLUMN ... SET DEFAULT <expression> in a separate statement, and backfill existing rows in batches.',
  'require-concurrent-index-creation': () => `CREATE INDEX CONCURRENTLY IF NOT EXISTS, in ${NEW_MIGRATION}.`,
  'require-concurrent-index-deletion': () => `DROP INDEX CONCURRENTLY IF EXISTS, in ${NEW_MIGRATION}.`,
  'constraint-missing-not-valid': () => `${SPLIT_VALIDATE}.`,
  'adding-foreign-key-constraint': () => `${SPLIT_VALIDATE}.`,
  'disallowed-unique-constraint': () =>
    'CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS in a migration of its own, then ALTER TABLE ... ADD CONSTRAINT ... UNIQUE USING INDEX ... in a later one.',
  'prefer-robust-stmts': () =>
    'add IF NOT EXISTS (or IF EXISTS): the migrator runs CONCURRENTLY statements outside a transaction and reruns them after a failure.',
  'syntax-error': () => 'correct the SQL: squawk parses it as Postgres 15 does.',
  'ban-concurrent-index-creation-in-transaction': () =>
    'keep CONCURRENTLY statements alone in a migration of their own: the migrator runs those outside a transaction.',
};

interface SquawkViolation {
  file: string;
  line: number;
  rule_name: string;
  message: string;
  help: string | null;
}

/** The squawk binary of the installed squawk-cli (its platform package), run without its Node wrapper. */
function squawkBinary(): string {
  const require = createRequire(import.meta.url);
  const { getBinaryPath } = require('squawk-cli/js/index.js') as { getBinaryPath: () => string };
  return getBinaryPath();
}

function runSquawk(files: readonly string[], config: string, inTransaction: boolean): SquawkViolation[] {
  if (files.length === 0) return [];
  const args = [
    '--config',
    config,
    '--reporter',
    'json',
    inTransaction ? '--assume-in-transaction' : '--no-assume-in-transaction',
    ...files,
  ];
  const run = spawnSync(squawkBinary(), args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (run.error) throw run.error;
  // squawk exits 1 when it found something; anything else without JSON is squawk failing.
  const out = run.stdout.trim();
  if (!out.startsWith('['))
    throw new Error(`squawk failed (exit ${run.status}): ${run.stderr.trim() || out}`);
  return JSON.parse(out) as SquawkViolation[];
}

export interface LintOptions {
  /** Where file names are reported relative to, and where `.squawk.toml` is found. */
  root: string;
  /** The folders to lint, relative to the root. */
  folders: readonly string[];
  /** The squawk config; `<root>/.squawk.toml` by default. */
  squawkConfig?: string;
}

interface Candidate {
  path: string;
  file: string;
  cls: MigrationClass | undefined;
  concurrent: boolean;
}

/** Every finding in the folders; none means the lint passes. */
export function lintMigrations(options: LintOptions): Finding[] {
  const findings: Finding[] = [];
  const candidates: Candidate[] = [];
  for (const folder of options.folders) {
    const dir = join(options.root, folder);
    const baseline = readBaseline(dir);
    const journal = readJournal(dir);
    const tags = new Set(journal.entries.map((e) => e.tag));
    const rel = (path: string) => relative(options.root, path);

    for (const [tag, entry] of Object.entries(baseline.migrations)) {
      const path = sqlPath(dir, tag);
      if (!tags.has(tag) || !existsSync(path)) {
        findings.push({
          file: rel(join(dir, BASELINE_FILE)),
          rule: 'baseline',
          message: `${tag} is in the baseline but not in the journal.`,
          fix: `remove ${tag} from ${BASELINE_FILE}, or restore the migration.`,
        });
      } else if (sha256(readFileSync(path, 'utf8')) !== entry.sha256) {
        findings.push({
          file: rel(path),
          rule: 'baseline',
          message: 'a baseline migration changed: databases record the hash of the file they applied.',
          fix: 'restore the file (git checkout), and write the change as a new migration.',
        });
      }
    }

    for (const name of readdirSync(dir).filter((n) => n.endsWith('.sql'))) {
      if (!tags.has(name.slice(0, -'.sql'.length))) {
        findings.push({
          file: rel(join(dir, name)),
          rule: 'journal',
          message: 'not in meta/_journal.json: the migrator never applies it.',
          fix: 'generate migrations with npm run db:generate (drizzle-kit generate --custom for hand-written SQL), or delete the file.',
        });
      }
    }

    for (const { tag } of journal.entries) {
      if (baseline.migrations[tag]) continue;
      const path = sqlPath(dir, tag);
      const file = rel(path);
      const sql = readFileSync(path, 'utf8');
      const cls = classOf(sql);
      if (cls === undefined || cls === 'invalid') {
        findings.push({
          file,
          line: 1,
          rule: 'class-header',
          message:
            cls === undefined
              ? 'no "-- class:" first line.'
              : 'the first line names no class: expand or contract.',
          fix: 'make the first line "-- class: expand" (it only adds: the running release keeps working) or "-- class: contract" (it removes or changes what a release reads or writes); npm run db:generate writes it.',
        });
      }
      const chunks = chunksOf(sql).filter((c) => statementOf(c.text) !== '');
      const concurrent = chunks.some((c) => CONCURRENTLY.test(statementOf(c.text)));
      if (concurrent) {
        for (const chunk of chunks) {
          if (CONCURRENT_INDEX.test(statementOf(chunk.text))) continue;
          findings.push({
            file,
            line: statementLine(chunk),
            rule: 'concurrently-alone',
            message:
              'a migration holding CONCURRENTLY runs outside a transaction, one statement at a time: it may hold only CREATE INDEX CONCURRENTLY IF NOT EXISTS and DROP INDEX CONCURRENTLY IF EXISTS, one per statement-breakpoint.',
            fix: `move this statement to a migration of its own (npm run db:generate splits them), or make it one of those two, ending with ";--> statement-breakpoint" before the next.`,
          });
        }
      }
      candidates.push({ path, file, cls: cls === 'invalid' ? undefined : cls, concurrent });
    }
  }

  const config = options.squawkConfig ?? join(options.root, '.squawk.toml');
  const byPath = new Map(candidates.map((c) => [c.path, c]));
  const violations = [
    ...runSquawk(
      candidates.filter((c) => !c.concurrent).map((c) => c.path),
      config,
      true,
    ),
    ...runSquawk(
      candidates.filter((c) => c.concurrent).map((c) => c.path),
      config,
      false,
    ),
  ];
  for (const v of violations) {
    const candidate = byPath.get(v.file);
    const cls = candidate?.cls;
    if (cls === 'contract' && CONTRACT_ONLY.has(v.rule_name)) continue;
    const inExpand = cls === 'expand' && CONTRACT_ONLY.has(v.rule_name);
    findings.push({
      file: candidate?.file ?? v.file,
      // squawk counts lines from 0.
      line: v.line + 1,
      rule: v.rule_name,
      message: inExpand
        ? `${v.message} An expand keeps everything the running release reads and writes.`
        : v.message,
      fix:
        FIXES[v.rule_name]?.(cls) ??
        (v.help
          ? `${v.help} (squawk: https://squawkhq.com/docs/${v.rule_name})`
          : `https://squawkhq.com/docs/${v.rule_name}`),
    });
  }
  // A UNIQUE constraint cannot be NOT VALID: squawk's constraint-missing-not-valid on the same statement
  // would give a fix Postgres refuses, so disallowed-unique-constraint's fix stands alone.
  const unique = new Set(
    findings.filter((f) => f.rule === 'disallowed-unique-constraint').map((f) => `${f.file}:${f.line}`),
  );
  return findings
    .filter((f) => !(f.rule === 'constraint-missing-not-valid' && unique.has(`${f.file}:${f.line}`)))
    .sort((a, b) => a.file.localeCompare(b.file) || (a.line ?? 0) - (b.line ?? 0));
}
