// The examples are apps of their own on the platform package: an example (examples/<name>/) imports
// only its own files, Node's built-ins, the packages its package.json names, and of
// @honest-health/platform only its public entries (the `exports` keys but `./internal/*`). Types
// count: the specifiers are read from the source text, where `import type` is still there. Its tests
// too: they run copied out of the repository (test/platform-tarball.test.ts), so they bring their own
// support and declare their own dev tools.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  PLATFORM_PACKAGE as PACKAGE,
  publicEntries,
  sourcesUnder,
  specifiers,
} from '../support/import-scan.js';
import { repoRoot } from '../support/server.js';

// The example's build script is JavaScript (it runs on plain Node): its imports count as much.
const SCRIPTS = ['.ts', '.mjs'];

const packageName = (spec: string) => spec.split('/', spec.startsWith('@') ? 2 : 1).join('/');

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
  const found: string[] = [];
  for (const from of sourcesUnder(root, example, SCRIPTS)) {
    for (const spec of specifiers(readFileSync(join(root, from), 'utf8'))) {
      let allowed: boolean;
      if (spec.startsWith('.')) {
        const to = join(dirname(from), spec).replaceAll('\\', '/');
        allowed = to.startsWith(`${example}/`);
      } else if (spec.startsWith('node:')) {
        allowed = true;
      } else if (packageName(spec) === PACKAGE) {
        allowed = entries.has(spec) && declared.has(PACKAGE);
      } else {
        allowed = declared.has(packageName(spec));
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
      expect(sourcesUnder(repoRoot, example).length).toBeGreaterThan(5);
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
      'examples/demo/scripts/build.mjs':
        "import { b } from '../../../packages/platform/src/exports/build.mjs';\n",
      'examples/demo/src/internal.ts': "import { h } from '@honest-health/platform/internal/db/handle';\n",
      'examples/demo/src/subpath.ts': "import type { H } from '@honest-health/platform/src/db/handle.js';\n",
      'examples/demo/src/by-path.ts':
        "export type { T } from '../../../packages/platform/src/db/types.js';\n",
      'examples/demo/src/the-app.ts': "export const m = () => import('../../../src/app/module.js');\n",
      'examples/demo/src/undeclared.ts': "import pg from 'pg';\n",
      'examples/demo/src/support.ts': "import { until } from '../../../test/support/until.js';\n",
      'examples/demo/test/a.test.ts':
        "import { it } from 'vitest';\nimport { until } from '../../../test/support/until.js';\nimport { x } from '../src/x.js';\n",
      'examples/demo/test/b.test.ts': "import { Miniflare } from 'miniflare';\n",
    };
    const root = mkdtempSync(join(tmpdir(), 'example-boundaries-'));
    try {
      for (const [path, text] of Object.entries(files)) {
        mkdirSync(dirname(join(root, path)), { recursive: true });
        writeFileSync(join(root, path), text);
      }
      expect(beyondExample(root, 'examples/demo').sort()).toEqual([
        'examples/demo/scripts/build.mjs -> ../../../packages/platform/src/exports/build.mjs',
        'examples/demo/src/by-path.ts -> ../../../packages/platform/src/db/types.js',
        'examples/demo/src/internal.ts -> @honest-health/platform/internal/db/handle',
        'examples/demo/src/subpath.ts -> @honest-health/platform/src/db/handle.js',
        'examples/demo/src/support.ts -> ../../../test/support/until.js',
        'examples/demo/src/the-app.ts -> ../../../src/app/module.js',
        'examples/demo/src/undeclared.ts -> pg',
        'examples/demo/test/a.test.ts -> ../../../test/support/until.js',
        'examples/demo/test/a.test.ts -> vitest',
        'examples/demo/test/b.test.ts -> miniflare',
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
