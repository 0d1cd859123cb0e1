// The examples are apps of their own on the platform package: an example (examples/<name>/) imports
// only its own files, Node's built-ins, the packages its package.json names, and of
// @honest-health/platform only its public entries (the `exports` keys but `./internal/*`). Types
// count: the specifiers are read from the source text, where `import type` is still there. Its tests
// may also use this repository's test/support helpers and its dev tools (vitest, miniflare).
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/server.js';

const PACKAGE = '@honest-health/platform';

/** The package's public entries, by the names an app imports them under. */
function publicEntries(root: string): Set<string> {
  const manifest = JSON.parse(readFileSync(join(root, 'packages/platform/package.json'), 'utf8'));
  return new Set(
    Object.keys(manifest.exports as Record<string, string>)
      .filter((key) => !key.includes('*'))
      .map((key) => (key === '.' ? PACKAGE : `${PACKAGE}${key.slice(1)}`)),
  );
}

// import/export ... from, side-effect imports, import() in code and in types; comments dropped first.
const SPECIFIERS = [
  /\b(?:import|export)\b[^;'"]*?\bfrom\s*['"]([^'"]+)['"]/g,
  /\bimport\s*['"]([^'"]+)['"]/g,
  /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
];
function specifiers(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|\s)\/\/.*$/gm, '$1');
  return SPECIFIERS.flatMap((re) => [...code.matchAll(re)].map((m) => m[1] as string));
}

const packageName = (spec: string) => spec.split('/', spec.startsWith('@') ? 2 : 1).join('/');

/** Every .ts file of the example (relative to the root), node_modules aside. */
function sourcesOf(root: string, example: string): string[] {
  return readdirSync(join(root, example), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
    .map((e) =>
      join(e.parentPath, e.name)
        .slice(root.length + 1)
        .replaceAll('\\', '/'),
    )
    .filter((f) => !f.includes('/node_modules/'))
    .sort();
}

function examplesIn(root: string): string[] {
  return readdirSync(join(root, 'examples'), { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => `examples/${e.name}`)
    .sort();
}

/** The imports of an example that leave it, other than by the doors above. */
function beyondExample(root: string, example: string): string[] {
  const entries = publicEntries(root);
  const manifest = JSON.parse(readFileSync(join(root, example, 'package.json'), 'utf8'));
  const declared = new Set(Object.keys({ ...manifest.dependencies, ...manifest.devDependencies }));
  const rootManifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const devTools = new Set(Object.keys(rootManifest.devDependencies ?? {}));
  const found: string[] = [];
  for (const from of sourcesOf(root, example)) {
    const isTest = from.startsWith(`${example}/test/`);
    for (const spec of specifiers(readFileSync(join(root, from), 'utf8'))) {
      let allowed: boolean;
      if (spec.startsWith('.')) {
        const to = join(dirname(from), spec).replaceAll('\\', '/');
        allowed = to.startsWith(`${example}/`) || (isTest && to.startsWith('test/support/'));
      } else if (spec.startsWith('node:')) {
        allowed = true;
      } else if (packageName(spec) === PACKAGE) {
        allowed = entries.has(spec) && declared.has(PACKAGE);
      } else {
        allowed = declared.has(packageName(spec)) || (isTest && devTools.has(packageName(spec)));
      }
      if (!allowed) found.push(`${from} -> ${spec}`);
    }
  }
  return found;
}

describe('the examples stay apps of their own', () => {
  it('each example imports only itself, its declared packages and the platform by its public entries', () => {
    const examples = examplesIn(repoRoot);
    expect(examples).toContain('examples/notes');
    for (const example of examples) {
      expect(sourcesOf(repoRoot, example).length).toBeGreaterThan(5);
      expect(beyondExample(repoRoot, example)).toEqual([]);
    }
  });

  it('each example depends on the platform by name, as a workspace package', () => {
    const root = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
    expect(root.workspaces).toContain('examples/*');
    for (const example of examplesIn(repoRoot)) {
      const manifest = JSON.parse(readFileSync(join(repoRoot, example, 'package.json'), 'utf8'));
      expect(manifest.dependencies?.[PACKAGE]).toBe('*');
    }
  });

  it('the check sees paths into the package and the app, internal and undeclared names, types included', async () => {
    const files: Record<string, string> = {
      'package.json': JSON.stringify({ devDependencies: { vitest: '1' } }),
      'packages/platform/package.json': JSON.stringify({
        exports: { '.': './a.ts', './node': './b.ts', './internal/*': './*' },
      }),
      'examples/demo/package.json': JSON.stringify({
        dependencies: { [PACKAGE]: '*', hono: '1', 'drizzle-orm': '1' },
      }),
      'examples/demo/src/ok.ts': [
        "import { a } from '@honest-health/platform';",
        "import type { B } from '@honest-health/platform/node';",
        "import { Hono } from 'hono';",
        "import { sql } from 'drizzle-orm/pg-core';",
        "import { join } from 'node:path';",
        "import { x } from './x.js';",
        "// import { no } from '../../../src/app/module.js';",
        '',
      ].join('\n'),
      'examples/demo/src/x.ts': 'export const x = 1;\n',
      'examples/demo/src/internal.ts': "import { h } from '@honest-health/platform/internal/db/handle';\n",
      'examples/demo/src/subpath.ts': "import type { H } from '@honest-health/platform/src/db/handle.js';\n",
      'examples/demo/src/by-path.ts':
        "export type { T } from '../../../packages/platform/src/db/types.js';\n",
      'examples/demo/src/the-app.ts': "export const m = () => import('../../../src/app/module.js');\n",
      'examples/demo/src/undeclared.ts': "import pg from 'pg';\n",
      'examples/demo/src/support.ts': "import { until } from '../../../test/support/until.js';\n",
      'examples/demo/test/a.test.ts':
        "import { it } from 'vitest';\nimport { until } from '../../../test/support/until.js';\nimport { x } from '../src/x.js';\n",
    };
    const root = mkdtempSync(join(tmpdir(), 'example-boundaries-'));
    try {
      for (const [path, text] of Object.entries(files)) {
        mkdirSync(dirname(join(root, path)), { recursive: true });
        writeFileSync(join(root, path), text);
      }
      expect(beyondExample(root, 'examples/demo').sort()).toEqual([
        'examples/demo/src/by-path.ts -> ../../../packages/platform/src/db/types.js',
        'examples/demo/src/internal.ts -> @honest-health/platform/internal/db/handle',
        'examples/demo/src/subpath.ts -> @honest-health/platform/src/db/handle.js',
        'examples/demo/src/support.ts -> ../../../test/support/until.js',
        'examples/demo/src/the-app.ts -> ../../../src/app/module.js',
        'examples/demo/src/undeclared.ts -> pg',
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
