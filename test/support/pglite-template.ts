// A fresh PGlite data directory in about a second. Creating one runs initdb, which costs PGlite 0.5
// some 5 s of CPU (15 s and more on a busy 2-core machine); opening an existing one costs under one.
// So the first call on a machine initdb's an empty template, once per PGlite version, and every call
// copies it. The copy is an empty cluster: the app's migrations still run on it at boot, as on a
// first start.
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { buildOnce } from './build-once.js';
import { repoRoot } from './server.js';

function templateDir(): string {
  const { version } = JSON.parse(
    readFileSync(join(repoRoot, 'node_modules/@electric-sql/pglite/package.json'), 'utf8'),
  ) as { version: string };
  // Inside the checkout, not the shared temp directory: a template another user built there is not
  // writable by this one (EACCES), and node_modules/ is already this checkout's own and ignored.
  return join(repoRoot, 'node_modules/.cache', `pglite-template-${version}`);
}

/** Builds the template unless it exists; one builder at a time, the others wait for it. */
function ensureTemplate(dir: string): Promise<void> {
  return buildOnce(dir, async (into) => {
    const db = new PGlite(into);
    await db.waitReady;
    await db.close();
  });
}

/** A new, empty PGlite data directory of its own, and how to remove it. */
export async function freshPgliteDir(): Promise<{ dir: string; remove(): void }> {
  const template = templateDir();
  await ensureTemplate(template);
  const parent = mkdtempSync(join(tmpdir(), 'honest-health-pglite-'));
  const dir = join(parent, 'data');
  cpSync(template, dir, { recursive: true });
  return { dir, remove: () => rmSync(parent, { recursive: true, force: true }) };
}

/** Fills `dir` (which must not exist yet) with an empty PGlite data directory, as a first start would. */
export async function seedPgliteDir(dir: string): Promise<void> {
  const template = templateDir();
  await ensureTemplate(template);
  cpSync(template, dir, { recursive: true });
}
