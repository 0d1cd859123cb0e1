// The "naive" server for the failover benchmark (and the one-off honesty check of the failover
// drills): a scratch copy of this repository with the two halves of the fix taken out.
//   1. packages/platform/src/db/poison.ts: nothing is ever pool poison (poisonReason -> undefined, isPoisoned
//      -> false), so a request that meets 25006 answers 500 and disposes nothing.
//   2. packages/platform/src/db/probe.ts: a read_only probe reports read_only but disposes no pool.
// Each patch must match exactly once: if someone reshapes those files, this fails loudly instead of
// quietly benchmarking the fixed server against itself.
import { execFileSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

interface Patch {
  file: string;
  pattern: RegExp;
  replace: (match: string) => string;
  what: string;
}

const PATCHES: readonly Patch[] = [
  {
    file: 'packages/platform/src/db/poison.ts',
    pattern: /export function poisonReason\([^)]*\)[^{]*\{/g,
    replace: (m) => `${m}\n  return undefined; // NAIVE: nothing poisons a pool\n`,
    what: 'poisonReason() returns undefined',
  },
  {
    file: 'packages/platform/src/db/poison.ts',
    pattern: /export function isPoisoned\([^)]*\)[^{]*\{/g,
    replace: (m) => `${m}\n  return false; // NAIVE: nothing poisons a pool\n`,
    what: 'isPoisoned() returns false',
  },
  {
    file: 'packages/platform/src/db/probe.ts',
    pattern: /void probe\.dispose\([^)]*\);/g,
    replace: () => '/* NAIVE: probe pool not disposed */',
    what: 'read_only does not dispose the probe pool',
  },
  {
    file: 'packages/platform/src/db/probe.ts',
    pattern: /void app\.dispose\([^)]*\);/g,
    replace: () => '/* NAIVE: app pool not disposed */',
    what: 'read_only does not dispose the app pool',
  },
];

/** Applies the naive patches to the tree at `root` in place. Throws unless each matches exactly once. */
export function patchNaive(root: string): string[] {
  const applied: string[] = [];
  for (const patch of PATCHES) {
    const path = join(root, patch.file);
    const source = readFileSync(path, 'utf8');
    const matches = source.match(patch.pattern) ?? [];
    if (matches.length !== 1) {
      throw new Error(
        `naive patch "${patch.what}": expected exactly one match of ${patch.pattern} in ${patch.file}, found ${matches.length}`,
      );
    }
    writeFileSync(path, source.replace(patch.pattern, patch.replace));
    applied.push(`${patch.file}: ${patch.what}`);
  }
  return applied;
}

/**
 * Copies what the build needs (src/, packages/platform/, tools/: the build script; the product
 * imports nothing from dev/ or cli/, package.json) from `repo`
 * into `dir`, links node_modules, applies the naive patches and builds. Returns the naive `dist/node.js`.
 */
export function buildNaiveCopy(repo: string, dir: string): { entry: string; applied: string[] } {
  rmSync(dir, { recursive: true, force: true });
  cpSync(join(repo, 'src'), join(dir, 'src'), { recursive: true });
  cpSync(join(repo, 'packages/platform'), join(dir, 'packages/platform'), { recursive: true });
  cpSync(join(repo, 'tools'), join(dir, 'tools'), { recursive: true });
  cpSync(join(repo, 'package.json'), join(dir, 'package.json'));
  linkNodeModules(repo, dir);
  const applied = patchNaive(dir);
  execFileSync(process.execPath, ['tools/build.mjs'], { cwd: dir, stdio: 'inherit' });
  const entry = join(dir, 'dist/node.js');
  if (!existsSync(entry)) throw new Error(`naive build produced no ${entry}`);
  return { entry, applied };
}

// The repository's node_modules, entry by entry, except the workspace link: it must point at the
// copy's (patched) platform, not the repository's.
function linkNodeModules(repo: string, dir: string): void {
  mkdirSync(join(dir, 'node_modules/@honest-health'), { recursive: true });
  for (const name of readdirSync(join(repo, 'node_modules'))) {
    if (name === '@honest-health') continue;
    symlinkSync(join(repo, 'node_modules', name), join(dir, 'node_modules', name), 'dir');
  }
  symlinkSync(join(dir, 'packages/platform'), join(dir, 'node_modules/@honest-health/platform'), 'dir');
}
