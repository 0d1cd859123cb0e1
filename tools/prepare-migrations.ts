// The step of `npm run db:generate` after drizzle-kit generate: the new migrations of a folder (the
// argument, relative to the root) rewritten to follow docs/migrations.md (tools/migrations/prepare.ts),
// then the lint on that folder, whose findings name what is left to fix by hand. Exit 1 only when the
// rewrite itself failed: the author reads the findings, and CI's db:lint holds the line.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatFinding, lintMigrations } from './migrations/lint.js';
import { prepareMigrations } from './migrations/prepare.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const folder = process.argv[2];
if (!folder) {
  console.error('usage: tsx tools/prepare-migrations.ts <migrations folder>');
  process.exit(2);
}
try {
  for (const p of prepareMigrations(join(root, folder))) {
    console.log(`${folder}/${p.tag}.sql: ${p.cls}${p.notes.map((n) => `; ${n}`).join('')}`);
  }
} catch (err) {
  console.error(`db:generate: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}
const findings = lintMigrations({ root, folders: [folder] });
for (const finding of findings) console.error(formatFinding(finding));
if (findings.length > 0)
  console.error(`db:generate: fix the above by hand; npm run db:lint checks it (CI runs it)`);
