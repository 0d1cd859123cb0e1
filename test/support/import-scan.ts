// What the boundary tests (test/fast/boundaries.test.ts, example-boundaries.test.ts) read sources
// with: the files of a folder, the specifiers each names, the package's public entries.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const PLATFORM_PACKAGE = '@honest-health/platform';

/** The sources under `dir` (relative to `root`, forward slashes), node_modules and .d.ts aside. */
export function sourcesUnder(root: string, dir: string, extensions: readonly string[] = ['.ts']): string[] {
  return readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && extensions.some((x) => e.name.endsWith(x)) && !e.name.endsWith('.d.ts'))
    .map((e) =>
      join(e.parentPath, e.name)
        .slice(root.length + 1)
        .replaceAll('\\', '/'),
    )
    .filter((f) => !f.includes('/node_modules/'))
    .sort();
}

// import/export ... from, side-effect imports, import() in code and in types.
const SPECIFIERS = [
  /\b(?:import|export)\b[^;'"]*?\bfrom\s*['"]([^'"]+)['"]/g,
  /\bimport\s*['"]([^'"]+)['"]/g,
  /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
];

/**
 * Every specifier a source text names, `import type` included (read from the text, where types are
 * still there). Comments are dropped first, so a path named in prose is not an import.
 */
export function specifiers(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|\s)\/\/.*$/gm, '$1');
  return SPECIFIERS.flatMap((re) => [...code.matchAll(re)].map((m) => m[1] as string));
}

type ExportTarget = string | { default: string };

const platformExports = (root: string): [string, ExportTarget][] =>
  Object.entries(
    JSON.parse(readFileSync(join(root, 'packages/platform/package.json'), 'utf8')).exports as Record<
      string,
      ExportTarget
    >,
  ).filter(([key]) => !key.includes('*'));

/** The platform's public entries, by the names an app imports them under (its `exports` but patterns). */
export function publicEntries(root: string): Set<string> {
  return new Set(
    platformExports(root).map(([key]) =>
      key === '.' ? PLATFORM_PACKAGE : `${PLATFORM_PACKAGE}${key.slice(1)}`,
    ),
  );
}

/**
 * The sources (relative to the root) the public entries are built from: where a bundler that reads the
 * root tsconfig's paths resolves them in this repository, instead of the built dist/ an install gets.
 */
export function publicEntrySources(root: string): Set<string> {
  return new Set(
    platformExports(root).map(([, target]) => {
      const built = typeof target === 'string' ? target : target.default;
      return `packages/platform/${built
        .replace(/^\.\/dist\//, 'src/')
        .replace(/\.js$/, '.ts')
        .replace(/^\.\//, '')}`;
    }),
  );
}
