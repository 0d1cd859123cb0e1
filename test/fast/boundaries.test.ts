// The layering rules (ARCHITECTURE.md, DESIGN.md section 2):
// - the platform (packages/platform/src/) imports nothing of this repository outside its package,
//   statically or with import() (checked on the imports esbuild resolves);
// - nothing outside the package reaches into it by a relative path, and the app, its entries, tools
//   and benches name only the package's public entries (its `exports`; this repository's tests may
//   also name `@honest-health/platform/internal/*`, a tsconfig path to its modules, no export);
//   `import type` included, read from the source text;
// - a runtime entry (src/runtime/node.ts, bun.ts, worker.ts) imports only the platform's public
//   entries and src/app/module.ts: it wires the platform's adapter to the app module and holds nothing
//   else (Node and Bun wire src/app/process-module.ts instead, the same module with its migrations,
//   and the drivers the app offers, src/app/databases.ts);
// - no runtime entry reaches dev/ (the Xero sandbox, the development mode that runs it) or cli/: the
//   product's builds (dist/, the Worker bundles) hold no fake (test/product-bundles.test.ts reads the
//   built files).
// esbuild's metafile lists, for every file it reached, each import it kept with the file it resolved
// to and its kind (import statement, re-export, dynamic import, require). Imports TypeScript erases
// (`import type`, `export type`, `typeof import()`) never reach a bundle and are not listed; `tsc`
// still type-checks across them.
// - inside the platform the folders are layers (LAYERS below): a file imports only its own layer or
//   one below it. Types count too (a type is a dependency of the design), so that check reads the
//   source text, where `import type` is still there, instead of esbuild's metafile.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import {
  PLATFORM_PACKAGE as PACKAGE,
  publicEntries,
  publicEntrySources,
  sourcesUnder,
  specifiers,
} from '../support/import-scan.js';
import { repoRoot } from '../support/server.js';

const PROCESS_ENTRIES = ['src/runtime/node.ts', 'src/runtime/bun.ts'];
const WORKER_ENTRIES = ['src/runtime/worker.ts', 'src/runtime/worker-hyperdrive.ts'];
const RUNTIME_ENTRIES = [...PROCESS_ENTRIES, ...WORKER_ENTRIES];
const APP_MODULE = 'src/app/module.ts';
const PLATFORM = 'packages/platform/src';
// Where the app and what runs it live: none may name the package's internals.
const APP_DIRS = ['src', 'cli', 'dev', 'tools', 'bench'];
// Tests may also use `@honest-health/platform/internal/*`.
const TEST_DIRS = ['test'];
const SELF = 'test/fast/boundaries.test.ts';
const PROCESS_APP_MODULE = 'src/app/process-module.ts';
// The drivers Node and Bun offer (the app chooses which; each is imported from its driver's entry).
const PROCESS_DATABASES = 'src/app/databases.ts';

interface Import {
  /** The importing file, relative to the root, with forward slashes. */
  from: string;
  /** The file it resolved to (relative to the root), or the specifier of an external import. */
  to: string;
  kind: string;
  external: boolean;
}

/** Every import of every file reachable from the entries, as esbuild resolved it. */
async function importsFrom(root: string, entryPoints: string[]): Promise<Import[]> {
  const { metafile } = await build({
    absWorkingDir: root,
    entryPoints,
    bundle: true,
    metafile: true,
    write: false,
    platform: 'node',
    format: 'esm',
    // Packages are not ours to check, and the Worker's `cloudflare:` modules only resolve in workerd.
    packages: 'external',
    external: ['cloudflare:*'],
    outdir: join(root, '.boundaries-out'),
    logLevel: 'silent',
  });
  return Object.entries(metafile.inputs).flatMap(([from, input]) =>
    input.imports.map((i) => ({ from, to: i.path, kind: i.kind, external: i.external === true })),
  );
}

const show = (imports: Import[]) => imports.map((i) => `${i.from} -> ${i.to} (${i.kind})`);

/** Imports from the platform into this repository outside its package. */
async function platformBeyondPackage(root: string): Promise<string[]> {
  const imports = await importsFrom(root, sourcesUnder(root, PLATFORM));
  return show(
    imports.filter(
      (i) => i.from.startsWith(`${PLATFORM}/`) && !i.external && !i.to.startsWith('packages/platform/'),
    ),
  );
}

/**
 * Imports, types included, into the package from outside it: by a relative path into packages/, or
 * (from `dirs`) by a name that is not one of its public entries.
 */
function intoPackageInternals(root: string, dirs: readonly string[], publicOnly: boolean): string[] {
  const entries = publicEntries(root);
  const found: string[] = [];
  // This file's fixtures spell such imports out in strings.
  // tools/build.mjs is JavaScript (the build runs on plain Node): its imports count as much.
  const sources = dirs.flatMap((dir) => sourcesUnder(root, dir, ['.ts', '.mjs'])).filter((f) => f !== SELF);
  for (const from of sources) {
    for (const spec of specifiers(readFileSync(join(root, from), 'utf8'))) {
      const byPath =
        spec.startsWith('.') && join(dirname(from), spec).replaceAll('\\', '/').startsWith('packages/');
      const internal = spec.startsWith(`${PACKAGE}/`) && !entries.has(spec);
      if (byPath || (publicOnly && internal)) found.push(`${from} -> ${spec}`);
    }
  }
  return found;
}

/** Imports of the runtime entries that are neither the platform's public entries nor the app module. */
async function runtimeBeyondWiring(root: string, entries: string[]): Promise<string[]> {
  const imports = await importsFrom(root, entries);
  const platform = publicEntries(root);
  // The root tsconfig's paths resolve the public entries to their sources.
  const platformSources = publicEntrySources(root);
  const allowed = (i: Import) =>
    i.external
      ? platform.has(i.to)
      : platformSources.has(i.to) ||
        i.to === APP_MODULE ||
        ((i.to === PROCESS_APP_MODULE || i.to === PROCESS_DATABASES) && PROCESS_ENTRIES.includes(i.from));
  return show(imports.filter((i) => entries.includes(i.from) && !allowed(i)));
}

// Lowest first; telemetry/ and metrics/ are one layer; exports/ holds the package's entries. A file
// directly in the platform's src/ has no layer.
const LAYERS: readonly (readonly string[])[] = [
  ['util'],
  ['db'],
  ['jobs'],
  ['telemetry', 'metrics'],
  ['http'],
  ['lifecycle'],
  ['runtimes'],
  ['exports'],
];
const layerOf = (path: string): number => {
  const folder = path.slice(`${PLATFORM}/`.length).split('/');
  return folder.length < 2 ? -1 : LAYERS.findIndex((l) => l.includes(folder[0] as string));
};

/** Imports (types included) from a layer of the platform into a higher one, or from/into no layer. */
function againstLayers(root: string): string[] {
  const found: string[] = [];
  for (const from of sourcesUnder(root, PLATFORM)) {
    const own = layerOf(from);
    if (own === -1) found.push(`${from} is in no layer`);
    for (const spec of specifiers(readFileSync(join(root, from), 'utf8'))) {
      if (!spec.startsWith('.')) continue;
      const to = join(dirname(from), spec).replaceAll('\\', '/').replace(/\.js$/, '.ts');
      if (!to.startsWith(`${PLATFORM}/`)) continue;
      const layer = layerOf(to);
      if (layer === -1 || layer > own) found.push(`${from} -> ${to}`);
    }
  }
  return found;
}

/** A throwaway source tree: path -> contents. */
async function inFixture(files: Record<string, string>, check: (root: string) => Promise<void>) {
  const root = mkdtempSync(join(tmpdir(), 'boundaries-'));
  try {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), text);
    }
    await check(root);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

describe('import boundaries', () => {
  it('the platform imports nothing outside its package, statically or with import()', async () => {
    expect(sourcesUnder(repoRoot, PLATFORM).length).toBeGreaterThan(10);
    expect(await platformBeyondPackage(repoRoot)).toEqual([]);
  });

  it('nothing outside the package imports its files by path; the app names only its public entries', () => {
    expect(publicEntries(repoRoot).size).toBeGreaterThan(5);
    expect(intoPackageInternals(repoRoot, APP_DIRS, true)).toEqual([]);
    expect(intoPackageInternals(repoRoot, TEST_DIRS, false)).toEqual([]);
  });

  it('the internals check sees relative paths into the package and non-public names, types included', async () => {
    const files = {
      'packages/platform/package.json': JSON.stringify({
        exports: { '.': './a.ts', './db': './b.ts', './internal/*': './*' },
      }),
      'src/app/ok.ts':
        "import { a } from '@honest-health/platform';\nimport type { B } from '@honest-health/platform/db';\n",
      'src/app/path.ts': "import type { X } from '../../packages/platform/src/db/types.js';\n",
      'src/app/internal.ts': "import { y } from '@honest-health/platform/internal/db/handle';\n",
      'tools/lazy.ts': "export const l = () => import('../packages/platform/src/db/driver.js');\n",
      'tools/build.mjs': "import { b } from '@honest-health/platform/internal/exports/build';\n",
      'test/uses-internal.ts': "import { y } from '@honest-health/platform/internal/db/handle';\n",
      'test/path.ts': "export * from '../packages/platform/src/util/log.js';\n",
    };
    await inFixture(files, async (root) => {
      expect(intoPackageInternals(root, ['src', 'tools'], true).sort()).toEqual([
        'src/app/internal.ts -> @honest-health/platform/internal/db/handle',
        'src/app/path.ts -> ../../packages/platform/src/db/types.js',
        'tools/build.mjs -> @honest-health/platform/internal/exports/build',
        'tools/lazy.ts -> ../packages/platform/src/db/driver.js',
      ]);
      expect(intoPackageInternals(root, ['test'], false)).toEqual([
        'test/path.ts -> ../packages/platform/src/util/log.js',
      ]);
    });
  });

  it('inside the platform a folder imports only its own layer or those below it, types included', () => {
    expect(againstLayers(repoRoot)).toEqual([]);
  });

  it('the layer check sees upward imports of every kind, and files outside any layer', async () => {
    const files = {
      'packages/platform/src/util/leaf.ts': "import { x } from '../db/pool.js';\nexport const y = x;\n",
      'packages/platform/src/util/types.ts':
        "import type { Pool } from '../db/pool.js';\nexport type P = Pool;\n",
      'packages/platform/src/util/reexport.ts': "export type { Pool } from '../http/route.js';\n",
      'packages/platform/src/db/typeof.ts': "export type R = typeof import('../jobs/tick.js');\n",
      'packages/platform/src/db/lazy.ts': "export const load = () => import('../lifecycle/boot.js');\n",
      'packages/platform/src/db/multi.ts':
        "import {\n  type A,\n  b,\n} from '../metrics/m.js';\nexport { b };\n",
      'packages/platform/src/db/pool.ts':
        "import '../util/leaf.js';\n// from '../runtimes/node.js' in a comment\nexport const x = 1;\n",
      'packages/platform/src/metrics/m.ts': "import { t } from '../telemetry/t.js';\nexport const b = t;\n",
      'packages/platform/src/telemetry/t.ts': "import { b } from '../metrics/m.js';\nexport const t = b;\n",
      'packages/platform/src/loose.ts': 'export {};\n',
    };
    await inFixture(files, async (root) => {
      expect(againstLayers(root).sort()).toEqual([
        'packages/platform/src/db/lazy.ts -> packages/platform/src/lifecycle/boot.ts',
        'packages/platform/src/db/multi.ts -> packages/platform/src/metrics/m.ts',
        'packages/platform/src/db/typeof.ts -> packages/platform/src/jobs/tick.ts',
        'packages/platform/src/loose.ts is in no layer',
        'packages/platform/src/util/leaf.ts -> packages/platform/src/db/pool.ts',
        'packages/platform/src/util/reexport.ts -> packages/platform/src/http/route.ts',
        'packages/platform/src/util/types.ts -> packages/platform/src/db/pool.ts',
      ]);
    });
  });

  it("a runtime entry imports only the platform's public entries and src/app/module.ts", async () => {
    expect(await runtimeBeyondWiring(repoRoot, RUNTIME_ENTRIES)).toEqual([]);
  });

  it('no runtime entry reaches dev/ (the Xero sandbox, development mode) or cli/; dev/start.ts does', async () => {
    const reached = async (entry: string) =>
      (await importsFrom(repoRoot, [entry]))
        .filter((i) => i.to.startsWith('dev/') || i.to.startsWith('cli/'))
        .map((i) => i.to);
    for (const entry of RUNTIME_ENTRIES) expect(await reached(entry)).toEqual([]);
    // The check sees the sandbox where it is wired: development mode's entry, outside every build.
    expect(await reached('dev/start.ts')).toContain('dev/xero-sandbox/server.ts');
  });

  it('the checks see static, re-exported, dynamic and nested imports, and resolve paths', async () => {
    const files = {
      'packages/platform/package.json': JSON.stringify({ exports: { '.': './a.ts', './node': './b.ts' } }),
      'src/app/module.ts': 'export const module = 1;\n',
      'src/app/routes.ts': 'export const routes = 1;\n',
      'packages/platform/src/clean.ts':
        "import { helper } from './nested/helper.js';\nexport const x = helper;\n",
      'packages/platform/src/nested/helper.ts': 'export const helper = 1;\n',
      'packages/platform/src/static.ts':
        "import { routes } from '../../../src/app/routes.js';\nexport const s = routes;\n",
      'packages/platform/src/reexport.ts': "export * from '../../../src/app/routes.js';\n",
      'packages/platform/src/lazy.ts': "export const load = () => import('../../../tools/x.js');\n",
      'packages/platform/src/deep/inner.ts': "import '../../../../src/app/module.js';\n",
      'tools/x.ts': 'export {};\n',
      // A type-only import is erased, as in the build: not a runtime dependency.
      'packages/platform/src/types.ts':
        "import type { routes } from '../../../src/app/routes.js';\nexport type R = typeof routes;\n",
      'src/runtime/node.ts': "import '@honest-health/platform/node';\nimport '../app/module.js';\n",
      'src/runtime/bun.ts':
        "import { hostname } from 'node:os';\nimport '../app/routes.js';\nimport '@honest-health/platform/internal/db/handle';\nhostname();\n",
      'src/runtime/worker.ts': "import './helper.js';\nimport 'hono';\n",
      'src/runtime/helper.ts': 'export {};\n',
      // The Node/Bun module (the app with its migrations) is refused to a Workers entry.
      'src/runtime/worker-hyperdrive.ts': "import '../app/process-module.js';\n",
      'src/app/process-module.ts': 'export {};\n',
    };
    await inFixture(files, async (root) => {
      expect((await platformBeyondPackage(root)).sort()).toEqual([
        'packages/platform/src/deep/inner.ts -> src/app/module.ts (import-statement)',
        'packages/platform/src/lazy.ts -> tools/x.ts (dynamic-import)',
        'packages/platform/src/reexport.ts -> src/app/routes.ts (import-statement)',
        'packages/platform/src/static.ts -> src/app/routes.ts (import-statement)',
      ]);
      expect((await runtimeBeyondWiring(root, RUNTIME_ENTRIES)).sort()).toEqual([
        'src/runtime/bun.ts -> @honest-health/platform/internal/db/handle (import-statement)',
        'src/runtime/bun.ts -> node:os (import-statement)',
        'src/runtime/bun.ts -> src/app/routes.ts (import-statement)',
        'src/runtime/worker-hyperdrive.ts -> src/app/process-module.ts (import-statement)',
        'src/runtime/worker.ts -> hono (import-statement)',
        'src/runtime/worker.ts -> src/runtime/helper.ts (import-statement)',
      ]);
    });
  });
});
