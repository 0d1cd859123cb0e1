// `npm run db:generate` as an author runs it: the real drizzle-kit generate on a copy of the schema and
// of drizzle/ in a temp dir, then the post-processor (tools/migrations/prepare.ts). What it writes
// passes the lint, index builds on existing tables are split out CONCURRENTLY, and drizzle-kit's next
// diff still starts from the newest snapshot. Then it all runs on PGlite, in memory.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, describe, expect, it } from 'vitest';
import { readJournal, snapshotPath, sqlPath } from '../../tools/migrations/folder.js';
import { formatFinding, lintMigrations } from '../../tools/migrations/lint.js';
import {
  deriveClass,
  prepareMigrations,
  type Snapshot,
  splitMigration,
} from '../../tools/migrations/prepare.js';
import { freshPgliteDir } from '../support/pglite-template.js';
import { repoRoot } from '../support/server.js';

const root = mkdtempSync(join(tmpdir(), 'migration-generate-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const dir = join(root, 'drizzle');
cpSync(join(repoRoot, 'drizzle'), dir, { recursive: true });
// The schema copy imports drizzle-orm and the platform's schema by name, as the original does.
symlinkSync(join(repoRoot, 'node_modules'), join(root, 'node_modules'), 'dir');
// In the workspace the platform resolves to its sources through the root tsconfig's paths.
writeFileSync(join(root, 'tsconfig.json'), JSON.stringify({ extends: join(repoRoot, 'tsconfig.json') }));
let schema = readFileSync(join(repoRoot, 'src/app/schema.ts'), 'utf8');

/** Edits the schema copy; the anchor must be there, so a change to the real schema shows up here. */
function editSchema(anchor: string, replacement: string): void {
  expect(schema).toContain(anchor);
  schema = schema.replace(anchor, replacement);
  writeFileSync(join(root, 'schema.ts'), schema);
}

const generate = () =>
  execFileSync(
    process.execPath,
    [
      join(repoRoot, 'node_modules/drizzle-kit/bin.cjs'),
      'generate',
      '--dialect',
      'postgresql',
      '--schema',
      './schema.ts',
      '--out',
      './drizzle',
    ],
    { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  );

/** The number `n` after a tag's, as drizzle-kit writes it (`0019`). */
const next = (tag: string, n: number) => String(Number(tag.slice(0, 4)) + n).padStart(4, '0');
const sqlOf = (tag: string) => readFileSync(sqlPath(dir, tag), 'utf8');
const snapshot = (idx: number) => JSON.parse(readFileSync(snapshotPath(dir, idx), 'utf8')) as Snapshot;
const lint = () =>
  lintMigrations({ root, folders: ['drizzle'], squawkConfig: join(repoRoot, '.squawk.toml') }).map(
    formatFinding,
  );

/** Journal order, `when` strictly increasing, and each snapshot the child of the one before. */
function expectOneChain(): void {
  const entries = readJournal(dir).entries;
  entries.forEach((e, i) => {
    expect(e.idx).toBe(i);
    if (i === 0) return;
    expect(e.when).toBeGreaterThan(entries[i - 1]?.when ?? 0);
    expect(snapshot(i).prevId).toBe(snapshot(i - 1).id);
  });
}

describe('npm run db:generate', () => {
  it('a nullable column and an index on invoice_pushes: an expand, and the index CONCURRENTLY in a migration of its own', () => {
    editSchema(
      "    xeroMarker: text('xero_marker'),\n",
      "    xeroMarker: text('xero_marker'),\n    note: text('note'),\n",
    );
    editSchema(
      "    index('invoice_pushes_settled_idx')",
      "    index('invoice_pushes_status_idx').on(t.status, t.createdAt),\n    index('invoice_pushes_settled_idx')",
    );
    expect(generate()).toContain('Your SQL migration file');
    const generated = readJournal(dir).entries.at(-1)?.tag ?? '';
    // drizzle-kit's own output: both statements in one migration, the index blocking writes.
    expect(sqlOf(generated)).toContain('CREATE INDEX "invoice_pushes_status_idx" ON "invoice_pushes"');

    const prepared = prepareMigrations(dir);
    expect(prepared.map((p) => [p.tag, p.cls])).toEqual([
      [generated, 'expand'],
      [`${next(generated, 1)}_${generated.slice(5)}_indexes`, 'expand'],
    ]);
    expect(sqlOf(generated)).toBe('-- class: expand\nALTER TABLE "invoice_pushes" ADD COLUMN "note" text;');
    expect(sqlOf(prepared[1]?.tag ?? '')).toBe(
      '-- class: expand\nCREATE INDEX CONCURRENTLY IF NOT EXISTS "invoice_pushes_status_idx" ON "invoice_pushes" USING btree ("status","created_at");',
    );
    expectOneChain();
    expect(lint()).toEqual([]);
    // Prepared once: a second run changes nothing. The next generate, below, starts from the copied
    // snapshot: drizzle-kit refuses a broken chain.
    expect(prepareMigrations(dir)).toEqual([]);
  });

  it('a dropped column, a foreign key on an existing table and a dropped index: a contract, the index and the VALIDATE split out', () => {
    editSchema("    xeroMarker: text('xero_marker'),\n", '');
    editSchema(
      "    authEventId: text('auth_event_id'),\n",
      "    authEventId: text('auth_event_id'),\n    ownerOrg: uuid('owner_org').references(() => organizations.id),\n",
    );
    editSchema("    index('invoice_pushes_org_created_idx').on(t.organizationId, t.createdAt, t.id),\n", '');
    generate();
    const generated = readJournal(dir).entries.at(-1)?.tag ?? '';
    const name = generated.slice(5);

    const prepared = prepareMigrations(dir);
    expect(prepared.map((p) => [p.tag, p.cls])).toEqual([
      [generated, 'contract'],
      [`${next(generated, 1)}_${name}_indexes`, 'expand'],
      [`${next(generated, 2)}_${name}_validate`, 'expand'],
    ]);
    expect(prepared[0]?.notes.join()).toContain('invoice_pushes.xero_marker removed');
    const main = sqlOf(generated);
    expect(main.split('\n')[0]).toBe('-- class: contract');
    expect(main).toContain('ALTER TABLE "invoice_pushes" DROP COLUMN "xero_marker";');
    expect(main).toMatch(
      /ADD CONSTRAINT "xero_grants_owner_org_organizations_id_fk" FOREIGN KEY .+ NOT VALID;/,
    );
    expect(main).not.toContain('DROP INDEX');
    expect(sqlOf(`${next(generated, 1)}_${name}_indexes`)).toBe(
      '-- class: expand\nDROP INDEX CONCURRENTLY IF EXISTS "invoice_pushes_org_created_idx";',
    );
    expect(sqlOf(`${next(generated, 2)}_${name}_validate`)).toBe(
      '-- class: expand\nALTER TABLE "xero_grants" VALIDATE CONSTRAINT "xero_grants_owner_org_organizations_id_fk";',
    );
    expectOneChain();
    expect(lint()).toEqual([]);
    expect(generate()).toContain('No schema changes');
  });

  it('what it wrote runs on Postgres: each migration in a transaction of its own, CONCURRENTLY ones outside any', async () => {
    const data = await freshPgliteDir();
    const db = new PGlite(data.dir);
    try {
      for (const { tag } of readJournal(dir).entries) {
        const statements = sqlOf(tag)
          .split('--> statement-breakpoint')
          .map((s) => s.trim())
          .filter(Boolean);
        if (statements.some((s) => /\bCONCURRENTLY\b/.test(s))) {
          for (const statement of statements) await db.query(statement);
        } else {
          await db.transaction(async (tx) => {
            for (const statement of statements) await tx.query(statement);
          });
        }
      }
      const indexes = await db.query<{ indexname: string }>(
        `SELECT indexname FROM pg_indexes WHERE tablename = 'invoice_pushes'`,
      );
      expect(indexes.rows.map((r) => r.indexname)).toContain('invoice_pushes_status_idx');
      expect(indexes.rows.map((r) => r.indexname)).not.toContain('invoice_pushes_org_created_idx');
      const fk = await db.query<{ convalidated: boolean }>(
        `SELECT convalidated FROM pg_constraint WHERE conname = 'xero_grants_owner_org_organizations_id_fk'`,
      );
      expect(fk.rows).toEqual([{ convalidated: true }]);
    } finally {
      try {
        await db.close();
      } finally {
        data.remove();
      }
    }
  });
});

describe('the post-processor, statement by statement', () => {
  const table = (
    name: string,
    columns: Record<string, { type: string; notNull: boolean; default?: string }>,
  ) => ({
    [`public.${name}`]: {
      name,
      schema: '',
      columns: Object.fromEntries(Object.entries(columns).map(([c, v]) => [c, { name: c, ...v }])),
    },
  });
  const snap = (tables: Snapshot['tables'], enums?: Snapshot['enums']): Snapshot => ({
    id: 'x',
    prevId: 'y',
    tables,
    ...(enums ? { enums } : {}),
  });
  const before = snap(
    table('t', { a: { type: 'text', notNull: false }, b: { type: 'integer', notNull: true, default: '0' } }),
  );

  it('derives a contract from what the snapshots lost or changed, an expand from what they gained', () => {
    const derived = (after: Snapshot) => deriveClass(before, after);
    expect(derived(snap({})).reasons).toEqual(['table public.t removed or renamed']);
    expect(
      derived(snap(table('t', { b: { type: 'integer', notNull: true, default: '0' } }))).reasons,
    ).toEqual(['column t.a removed or renamed']);
    expect(
      derived(
        snap(
          table('t', {
            a: { type: 'uuid', notNull: false },
            b: { type: 'integer', notNull: true, default: '0' },
          }),
        ),
      ).reasons,
    ).toEqual(['column t.a retyped']);
    expect(
      derived(
        snap(
          table('t', {
            a: { type: 'text', notNull: true },
            b: { type: 'integer', notNull: true, default: '0' },
          }),
        ),
      ).cls,
    ).toBe('contract');
    expect(
      derived(
        snap(table('t', { a: { type: 'text', notNull: false }, b: { type: 'integer', notNull: true } })),
      ).reasons,
    ).toEqual(['column t.b lost its default (the running release inserts without it)']);
    expect(
      deriveClass(
        snap({}, { 'public.s': { name: 's', values: ['a', 'b'] } }),
        snap({}, { 'public.s': { name: 's', values: ['a'] } }),
      ).reasons,
    ).toEqual(["enum public.s lost 'b'"]);
    const grown = snap({
      ...table('t', {
        a: { type: 'text', notNull: false },
        b: { type: 'integer', notNull: true, default: '0' },
        c: { type: 'text', notNull: false },
      }),
      ...table('n', { a: { type: 'text', notNull: true } }),
    });
    expect(deriveClass(before, grown)).toEqual({ cls: 'expand', reasons: [] });
  });

  it('an index alone keeps the migration; on a new table it stays as written; a custom file keeps its comment', () => {
    const grown = snap({ ...before.tables, ...table('n', { a: { type: 'text', notNull: false } }) });
    const alone = splitMigration(
      'idx',
      'CREATE UNIQUE INDEX "t_a_idx" ON "t" USING btree ("a");',
      before,
      before,
    );
    expect(alone.map((m) => [m.name, m.sql])).toEqual([
      [
        'idx',
        '-- class: expand\nCREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "t_a_idx" ON "t" USING btree ("a");',
      ],
    ]);
    const created =
      'CREATE TABLE "n" (\n\t"a" text\n);\n--> statement-breakpoint\nCREATE INDEX "n_a_idx" ON "n" USING btree ("a");';
    expect(splitMigration('new', created, before, grown).map((m) => m.sql)).toEqual([
      `-- class: expand\n${created}`,
    ]);
    const custom = '-- Custom SQL migration file, put your code below! --';
    expect(splitMigration('custom', custom, before, before).map((m) => m.sql)).toEqual([
      `-- class: expand\n${custom}`,
    ]);
  });

  it('a CHECK on an existing table gets NOT VALID and a VALIDATE of its own; one already NOT VALID is left alone', () => {
    const check = 'ALTER TABLE "t" ADD CONSTRAINT "t_b_check" CHECK ("t"."b" >= 0);';
    expect(splitMigration('check', check, before, before).map((m) => m.sql)).toEqual([
      '-- class: expand\nALTER TABLE "t" ADD CONSTRAINT "t_b_check" CHECK ("t"."b" >= 0) NOT VALID;',
      '-- class: expand\nALTER TABLE "t" VALIDATE CONSTRAINT "t_b_check";',
    ]);
    const done = check.replace(';', ' NOT VALID;');
    expect(splitMigration('done', done, before, before).map((m) => m.sql)).toEqual([
      `-- class: expand\n${done}`,
    ]);
  });
});
