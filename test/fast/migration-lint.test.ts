// The migration lint (tools/migrations/lint.ts, docs/migrations.md): each rule fails a bad migration
// and passes its fix, written as tiny drizzle-kit folders in a temp dir. It runs squawk's binary (no
// database). Then the repository itself: every applied migration is in a baseline, and the lint passes.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type Baseline,
  MIGRATION_FOLDERS,
  readBaseline,
  readJournal,
  sha256,
  sqlPath,
} from '../../tools/migrations/folder.js';
import { type Finding, formatFinding, lintMigrations } from '../../tools/migrations/lint.js';
import { repoRoot } from '../support/server.js';

const root = mkdtempSync(join(tmpdir(), 'migration-lint-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const squawkConfig = join(repoRoot, '.squawk.toml');

let folders = 0;
/** A drizzle-kit folder under the temp dir holding these migrations in this order. */
function makeFolder(files: readonly string[], baseline?: (tags: string[]) => Baseline): string {
  const folder = `f${folders++}`;
  const dir = join(root, folder);
  mkdirSync(join(dir, 'meta'), { recursive: true });
  const tags = files.map((_, i) => `${String(i).padStart(4, '0')}_m`);
  files.forEach((sql, i) => {
    writeFileSync(join(dir, `${tags[i]}.sql`), sql);
  });
  const entries = tags.map((tag, idx) => ({ idx, version: '7', when: 1_000 + idx, tag, breakpoints: true }));
  writeFileSync(
    join(dir, 'meta/_journal.json'),
    JSON.stringify({ version: '7', dialect: 'postgresql', entries }),
  );
  if (baseline) writeFileSync(join(dir, 'baseline.json'), JSON.stringify(baseline(tags)));
  return folder;
}
const lintFolder = (folder: string) => lintMigrations({ root, folders: [folder], squawkConfig });
const lint = (files: readonly string[], baseline?: (tags: string[]) => Baseline) =>
  lintFolder(makeFolder(files, baseline));

const rules = (findings: readonly Finding[]) => [...new Set(findings.map((f) => f.rule))].sort();
const expand = (...statements: string[]) =>
  `-- class: expand\n${statements.join('--> statement-breakpoint\n')}`;
const contract = (...statements: string[]) =>
  `-- class: contract\n${statements.join('--> statement-breakpoint\n')}`;

describe('the class header', () => {
  it('fails a migration without one, or naming no class; passes expand and contract', () => {
    expect(rules(lint(['ALTER TABLE "t" ADD COLUMN "a" text;']))).toEqual(['class-header']);
    expect(rules(lint(['-- class: sideways\nALTER TABLE "t" ADD COLUMN "a" text;']))).toEqual([
      'class-header',
    ]);
    expect(lint([expand('ALTER TABLE "t" ADD COLUMN "a" text;')])).toEqual([]);
    expect(lint([contract('ALTER TABLE "t" DROP COLUMN "a";')])).toEqual([]);
  });
});

describe('what only a contract may do', () => {
  it.each([
    ['ban-drop-column', 'ALTER TABLE "t" DROP COLUMN "a";'],
    ['ban-drop-table', 'DROP TABLE "t";'],
    ['renaming-column', 'ALTER TABLE "t" RENAME COLUMN "a" TO "b";'],
    ['renaming-table', 'ALTER TABLE "t" RENAME TO "u";'],
  ])('%s fails an expand and passes a contract', (rule, statement) => {
    const findings = lint([expand(statement)]);
    expect(rules(findings)).toEqual([rule]);
    expect(findings[0]?.message).toContain('An expand keeps everything the running release reads and writes');
    expect(findings[0]?.fix).toContain('contract');
    expect(lint([contract(statement)])).toEqual([]);
  });
});

describe('what locks or breaks a running release, in any class', () => {
  it('changing-column-type: fails both classes; a new column in an expand passes', () => {
    for (const m of [expand, contract]) {
      expect(rules(lint([m('ALTER TABLE "t" ALTER COLUMN "a" SET DATA TYPE bigint;')]))).toEqual([
        'changing-column-type',
      ]);
    }
    expect(lint([expand('ALTER TABLE "t" ADD COLUMN "a_big" bigint;')])).toEqual([]);
  });

  it('adding-not-nullable-field: SET NOT NULL fails; NOT VALID check in the expand, SET NOT NULL in a contract after it passes', () => {
    const expandFinding = lint([expand('ALTER TABLE "t" ALTER COLUMN "a" SET NOT NULL;')]);
    expect(rules(expandFinding)).toEqual(['adding-not-nullable-field']);
    expect(expandFinding[0]?.fix).toContain('in a later contract');
    expect(rules(lint([contract('ALTER TABLE "t" ALTER COLUMN "a" SET NOT NULL;')]))).toEqual([
      'adding-not-nullable-field',
    ]);
    expect(
      lint([
        expand('ALTER TABLE "t" ADD CONSTRAINT "t_a_not_null" CHECK ("a" IS NOT NULL) NOT VALID;'),
        expand('ALTER TABLE "t" VALIDATE CONSTRAINT "t_a_not_null";'),
        contract(
          '-- squawk-ignore adding-not-nullable-field\nALTER TABLE "t" ALTER COLUMN "a" SET NOT NULL;',
        ),
      ]),
    ).toEqual([]);
  });

  it('adding-required-field: NOT NULL without a default fails; with a constant default passes', () => {
    expect(rules(lint([expand('ALTER TABLE "t" ADD COLUMN "a" text NOT NULL;')]))).toEqual([
      'adding-required-field',
    ]);
    expect(lint([expand(`ALTER TABLE "t" ADD COLUMN "a" text DEFAULT '' NOT NULL;`)])).toEqual([]);
  });

  it.each(['gen_random_uuid()', 'random()', 'clock_timestamp()'])(
    'adding-field-with-default: a volatile %s on an existing table fails; the column, then SET DEFAULT, passes',
    (volatile) => {
      const findings = lint([expand(`ALTER TABLE "t" ADD COLUMN "a" text DEFAULT ${volatile};`)]);
      expect(rules(findings)).toEqual(['adding-field-with-default']);
      expect(findings[0]?.fix).toContain('SET DEFAULT');
      expect(
        lint([
          expand(
            'ALTER TABLE "t" ADD COLUMN "a" text;',
            `ALTER TABLE "t" ALTER COLUMN "a" SET DEFAULT ${volatile};`,
          ),
        ]),
      ).toEqual([]);
    },
  );

  it('now() is STABLE, not volatile: Postgres stores it once, no rewrite, so it passes', () => {
    expect(lint([expand('ALTER TABLE "t" ADD COLUMN "a" timestamptz DEFAULT now() NOT NULL;')])).toEqual([]);
  });

  it('require-concurrent-index-creation: an index on an existing table fails; CONCURRENTLY alone passes', () => {
    const findings = lint([expand('CREATE INDEX "t_a_idx" ON "t" USING btree ("a");')]);
    expect(rules(findings)).toEqual(['require-concurrent-index-creation']);
    expect(findings[0]?.fix).toContain('CREATE INDEX CONCURRENTLY IF NOT EXISTS');
    expect(
      lint([expand('CREATE INDEX CONCURRENTLY IF NOT EXISTS "t_a_idx" ON "t" USING btree ("a");')]),
    ).toEqual([]);
  });

  it('an index on a table the same migration creates needs no CONCURRENTLY', () => {
    expect(
      lint([
        expand('CREATE TABLE "n" (\n\t"a" text\n);\n', 'CREATE INDEX "n_a_idx" ON "n" USING btree ("a");'),
      ]),
    ).toEqual([]);
  });

  it('require-concurrent-index-deletion: DROP INDEX fails; DROP INDEX CONCURRENTLY IF EXISTS passes', () => {
    expect(rules(lint([expand('DROP INDEX "t_a_idx";')]))).toEqual(['require-concurrent-index-deletion']);
    expect(lint([expand('DROP INDEX CONCURRENTLY IF EXISTS "t_a_idx";')])).toEqual([]);
  });

  it('prefer-robust-stmts: CONCURRENTLY without IF NOT EXISTS fails (it is rerun after a failure)', () => {
    expect(rules(lint([expand('CREATE INDEX CONCURRENTLY "t_a_idx" ON "t" USING btree ("a");')]))).toEqual([
      'concurrently-alone',
      'prefer-robust-stmts',
    ]);
  });

  it('concurrently-alone: CONCURRENTLY beside another statement, or two without a breakpoint, fails; split passes', () => {
    const index = 'CREATE INDEX CONCURRENTLY IF NOT EXISTS "t_a_idx" ON "t" USING btree ("a");';
    const mixed = lint([expand('ALTER TABLE "t" ADD COLUMN "a" text;', index)]);
    // Outside a transaction squawk also wants the ADD COLUMN rerunnable.
    expect(rules(mixed)).toEqual(['concurrently-alone', 'prefer-robust-stmts']);
    expect(mixed.find((f) => f.rule === 'concurrently-alone')?.line).toBe(2);
    const unbroken = `-- class: expand\n${index}\nDROP INDEX CONCURRENTLY IF EXISTS "t_b_idx";`;
    expect(rules(lint([unbroken]))).toEqual(['concurrently-alone']);
    expect(lint([expand('ALTER TABLE "t" ADD COLUMN "a" text;'), expand(index)])).toEqual([]);
  });

  const fk = 'ALTER TABLE "t" ADD CONSTRAINT "t_o_fk" FOREIGN KEY ("o") REFERENCES "public"."o"("id")';
  it('constraint-missing-not-valid and adding-foreign-key-constraint: a foreign key in one step fails', () => {
    expect(rules(lint([expand(`${fk};`)]))).toEqual([
      'adding-foreign-key-constraint',
      'constraint-missing-not-valid',
    ]);
  });

  it('constraint-missing-not-valid: NOT VALID then VALIDATE in one migration (one transaction) fails; two pass', () => {
    const validate = 'ALTER TABLE "t" VALIDATE CONSTRAINT "t_o_fk";';
    expect(rules(lint([expand(`${fk} NOT VALID;`, validate)]))).toEqual(['constraint-missing-not-valid']);
    expect(lint([expand(`${fk} NOT VALID;`), expand(validate)])).toEqual([]);
  });

  it('constraint-missing-not-valid: a CHECK in one step fails; NOT VALID passes', () => {
    const check = 'ALTER TABLE "t" ADD CONSTRAINT "t_a_check" CHECK ("a" > 0)';
    expect(rules(lint([expand(`${check};`)]))).toEqual(['constraint-missing-not-valid']);
    expect(lint([expand(`${check} NOT VALID;`)])).toEqual([]);
  });

  it('disallowed-unique-constraint: UNIQUE on an existing table fails; a concurrent unique index, then USING INDEX, passes', () => {
    // Not constraint-missing-not-valid too: a UNIQUE constraint cannot be NOT VALID.
    expect(rules(lint([expand('ALTER TABLE "t" ADD CONSTRAINT "t_a_unique" UNIQUE("a");')]))).toEqual([
      'disallowed-unique-constraint',
    ]);
    expect(
      lint([
        expand('CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "t_a_unique" ON "t" USING btree ("a");'),
        expand('ALTER TABLE "t" ADD CONSTRAINT "t_a_unique" UNIQUE USING INDEX "t_a_unique";'),
      ]),
    ).toEqual([]);
  });
});

it('syntax-error: SQL Postgres cannot parse fails', () => {
  expect(rules(lint([expand('ALTER TABLE "t" ADD COLUMN;')]))).toEqual(['syntax-error']);
});

describe('the baseline', () => {
  const history = 'ALTER TABLE "t" DROP COLUMN "a";\n';
  const baseline = (sql: string) => (tags: string[]) => ({
    why: 'history',
    migrations: { [tags[0] ?? '']: { class: 'contract' as const, sha256: sha256(sql) } },
  });

  it('skips its migrations, and fails one whose file changed', () => {
    expect(lint([history], baseline(history))).toEqual([]);
    const changed = lint([`${history}-- an edit\n`], baseline(history));
    expect(rules(changed)).toEqual(['baseline']);
    expect(changed[0]?.fix).toContain('restore the file');
  });

  it('fails a SQL file the journal does not name', () => {
    const folder = makeFolder([expand('ALTER TABLE "t" ADD COLUMN "a" text;')]);
    expect(lintFolder(folder)).toEqual([]);
    writeFileSync(join(root, folder, '0001_stray.sql'), expand('ALTER TABLE "t" ADD COLUMN "b" text;'));
    expect(rules(lintFolder(folder))).toEqual(['journal']);
  });
});

it('prints one line per finding: file, line, rule and the fix', () => {
  const [finding] = lint([
    expand('ALTER TABLE "t" ADD COLUMN "a" text;', 'CREATE INDEX "t_a_idx" ON "t" ("a");'),
  ]);
  expect(finding).toBeDefined();
  const line = formatFinding(finding as Finding);
  expect(line).toMatch(
    /^f\d+\/0000_m\.sql:3: require-concurrent-index-creation: .+ Fix: CREATE INDEX CONCURRENTLY IF NOT EXISTS/,
  );
  expect(line).not.toContain('\n');
});

describe('this repository', () => {
  it('has every applied migration in its folder baseline, unchanged, 0005_xero_grants as a contract', () => {
    const app = readBaseline(join(repoRoot, 'drizzle'));
    const tags = readJournal(join(repoRoot, 'drizzle')).entries.map((e) => e.tag);
    expect(tags.slice(0, 14).every((tag) => app.migrations[tag] !== undefined)).toBe(true);
    expect(Object.keys(app.migrations)).toHaveLength(14);
    expect(app.migrations['0005_xero_grants']?.class).toBe('contract');
    expect(app.why).toContain('sha256');
    for (const folder of MIGRATION_FOLDERS) {
      const dir = join(repoRoot, folder);
      for (const [tag, entry] of Object.entries(readBaseline(dir).migrations)) {
        expect(sha256(readFileSync(sqlPath(dir, tag), 'utf8')), tag).toBe(entry.sha256);
      }
    }
    expect(
      readBaseline(join(repoRoot, 'packages/platform/drizzle')).migrations['0000_platform_tables']?.class,
    ).toBe('expand');
  });

  it('passes the lint', () => {
    expect(lintMigrations({ root: repoRoot, folders: MIGRATION_FOLDERS }).map(formatFinding)).toEqual([]);
  });
});
