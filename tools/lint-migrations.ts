// `npm run db:lint`: the migration lint (tools/migrations/lint.ts, docs/migrations.md) on both folders,
// or on the folders given as arguments. One line per finding with its fix; exit 0 clean, 1 findings.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MIGRATION_FOLDERS } from './migrations/folder.js';
import { formatFinding, lintMigrations } from './migrations/lint.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const folders = args.length > 0 ? args : MIGRATION_FOLDERS;
const findings = lintMigrations({ root, folders });
for (const finding of findings) console.error(formatFinding(finding));
if (findings.length > 0) {
  console.error(`db:lint: ${findings.length} finding(s) in ${folders.join(', ')} (docs/migrations.md)`);
  process.exitCode = 1;
} else {
  console.log(`db:lint: ${folders.join(', ')}: every migration outside the baseline passes`);
}
