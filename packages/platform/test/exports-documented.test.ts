// Every entry of the package lists its names (no `export *`: the entry file is its whole API), and every
// name it exports has a TSDoc comment where it is declared, which editors show at the import.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const PACKAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..');
const manifest = JSON.parse(readFileSync(join(PACKAGE_DIR, 'package.json'), 'utf8')) as {
  exports: Record<string, string | { default: string }>;
};
/** The TypeScript entries, as source files: each export's build is made from one. */
const entries = Object.values(manifest.exports)
  .flatMap((target) => (typeof target === 'string' ? [] : [target.default]))
  .filter((built) => built.startsWith('./dist/'))
  .map((built) => join(PACKAGE_DIR, built.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts')));

/** `export { a, type B } from './x.js'` and `export type { C } from './y.js'`: each name and its module. */
function reExports(file: string): { name: string; from: string }[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/export\s+(?:type\s+)?\{([^}]*)\}\s*from\s*'([^']+)'/g)].flatMap((m) =>
    (m[1] as string)
      .split(',')
      .map((n) => n.trim().replace(/^type\s+/, ''))
      .filter((n) => n !== '')
      .map((name) => ({ name, from: join(dirname(file), (m[2] as string).replace(/\.js$/, '.ts')) })),
  );
}

/** Whether `name` is declared in `file` right after a `/** ... *\/` comment (line comments between allowed). */
function documented(file: string, name: string): boolean {
  const lines = readFileSync(file, 'utf8').split('\n');
  const declaration = new RegExp(
    `^export (?:declare )?(?:async )?(?:abstract )?(?:function\\*?|const|class|interface|type|let) ${name}\\b`,
  );
  const at = lines.findIndex((line) => declaration.test(line));
  if (at === -1) return false;
  let above = at - 1;
  while (above >= 0 && lines[above]?.trim().startsWith('//')) above -= 1;
  return lines[above]?.trim().endsWith('*/') ?? false;
}

describe('the package entries', () => {
  it('list their names: no `export *`', () => {
    expect(entries.length).toBeGreaterThan(10);
    const star = entries.filter((file) => /export\s+\*\s+from/.test(readFileSync(file, 'utf8')));
    expect(star.map((file) => file.slice(PACKAGE_DIR.length + 1))).toEqual([]);
  });

  it('document every name they export, where it is declared', () => {
    const missing = entries.flatMap((file) =>
      reExports(file)
        .filter(({ name, from }) => !documented(from, name))
        .map(({ name, from }) => `${name} (${from.slice(PACKAGE_DIR.length + 1)})`),
    );
    expect([...new Set(missing)]).toEqual([]);
  });
});
