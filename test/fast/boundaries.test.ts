// The layering rules (ARCHITECTURE.md, DESIGN.md section 2), checked on the imports esbuild resolves:
// - nothing under src/platform/ imports anything under src/app/, statically or with import();
// - a runtime entry (src/runtime/node.ts, bun.ts, worker.ts) imports only src/platform/** and
//   src/app/module.ts: it wires the platform's adapter to the app module and holds nothing else
//   (Node and Bun wire src/app/dev/sandbox.ts instead: the same module plus the development sandbox);
// - nothing the Workers entry reaches is under tools/ (the sandbox is for Node and Bun only).
// esbuild's metafile lists, for every file it reached, each import it kept with the file it resolved
// to and its kind (import statement, re-export, dynamic import, require). Imports TypeScript erases
// (`import type`, `export type`, `typeof import()`) never reach a bundle and are not listed; `tsc`
// still type-checks across them.
// - inside src/platform/ the folders are layers (LAYERS below): a file imports only its own layer or
//   one below it. Types count too (a type is a dependency of the design), so that check reads the
//   source text, where `import type` is still there, instead of esbuild's metafile.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/server.js';

const PROCESS_ENTRIES = ['src/runtime/node.ts', 'src/runtime/bun.ts'];
const WORKER_ENTRIES = ['src/runtime/worker.ts', 'src/runtime/worker-hyperdrive.ts'];
const RUNTIME_ENTRIES = [...PROCESS_ENTRIES, ...WORKER_ENTRIES];
const APP_MODULE = 'src/app/module.ts';
const PROCESS_APP_MODULE = 'src/app/dev/sandbox.ts';

interface Import {
  /** The importing file, relative to the root, with forward slashes. */
  from: string;
  /** The file it resolved to (relative to the root), or the specifier of an external import. */
  to: string;
  kind: string;
  external: boolean;
}

/** The .ts files under `dir` (relative to `root`), with forward slashes. */
function sourcesUnder(root: string, dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
    .map((e) =>
      join(e.parentPath, e.name)
        .slice(root.length + 1)
        .replaceAll('\\', '/'),
    )
    .sort();
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

/** Imports from src/platform/ into src/app/. */
async function platformIntoApp(root: string): Promise<string[]> {
  const imports = await importsFrom(root, sourcesUnder(root, 'src/platform'));
  return show(imports.filter((i) => i.from.startsWith('src/platform/') && i.to.startsWith('src/app/')));
}

/** Imports of the runtime entries that are neither the platform nor the app module. */
async function runtimeBeyondWiring(root: string, entries: string[]): Promise<string[]> {
  const imports = await importsFrom(root, entries);
  const allowed = (i: Import) =>
    !i.external &&
    (i.to.startsWith('src/platform/') ||
      i.to === APP_MODULE ||
      (i.to === PROCESS_APP_MODULE && PROCESS_ENTRIES.includes(i.from)));
  return show(imports.filter((i) => entries.includes(i.from) && !allowed(i)));
}

// Lowest first; telemetry/ and metrics/ are one layer. A file directly in src/platform/ has no layer.
const LAYERS: readonly (readonly string[])[] = [
  ['util'],
  ['db'],
  ['jobs'],
  ['telemetry', 'metrics'],
  ['http'],
  ['lifecycle'],
  ['runtimes'],
];
const layerOf = (path: string): number => {
  const folder = path.slice('src/platform/'.length).split('/');
  return folder.length < 2 ? -1 : LAYERS.findIndex((l) => l.includes(folder[0] as string));
};

// Every specifier a file names: import/export ... from, side-effect imports, import() in code and in
// types. Comments are dropped first so a path named in prose is not an import.
const SPECIFIERS = [
  /\b(?:import|export)\b[^;'"]*?\bfrom\s*['"]([^'"]+)['"]/g,
  /\bimport\s*['"]([^'"]+)['"]/g,
  /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
];
function specifiers(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|\s)\/\/.*$/gm, '$1');
  return SPECIFIERS.flatMap((re) => [...code.matchAll(re)].map((m) => m[1] as string));
}

/** Imports (types included) from a layer of src/platform/ into a higher one, or from/into no layer. */
function againstLayers(root: string): string[] {
  const found: string[] = [];
  for (const from of sourcesUnder(root, 'src/platform')) {
    const own = layerOf(from);
    if (own === -1) found.push(`${from} is in no layer`);
    for (const spec of specifiers(readFileSync(join(root, from), 'utf8'))) {
      if (!spec.startsWith('.')) continue;
      const to = join(dirname(from), spec).replaceAll('\\', '/').replace(/\.js$/, '.ts');
      if (!to.startsWith('src/platform/')) continue;
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
  it('nothing under src/platform/ imports src/app/, statically or with import()', async () => {
    expect(sourcesUnder(repoRoot, 'src/platform').length).toBeGreaterThan(10);
    expect(await platformIntoApp(repoRoot)).toEqual([]);
  });

  it('inside src/platform/ a folder imports only its own layer or those below it, types included', () => {
    expect(againstLayers(repoRoot)).toEqual([]);
  });

  it('the layer check sees upward imports of every kind, and files outside any layer', async () => {
    const files = {
      'src/platform/util/leaf.ts': "import { x } from '../db/pool.js';\nexport const y = x;\n",
      'src/platform/util/types.ts': "import type { Pool } from '../db/pool.js';\nexport type P = Pool;\n",
      'src/platform/util/reexport.ts': "export type { Pool } from '../http/route.js';\n",
      'src/platform/db/typeof.ts': "export type R = typeof import('../jobs/tick.js');\n",
      'src/platform/db/lazy.ts': "export const load = () => import('../lifecycle/boot.js');\n",
      'src/platform/db/multi.ts': "import {\n  type A,\n  b,\n} from '../metrics/m.js';\nexport { b };\n",
      'src/platform/db/pool.ts':
        "import '../util/leaf.js';\n// from '../runtimes/node.js' in a comment\nexport const x = 1;\n",
      'src/platform/metrics/m.ts': "import { t } from '../telemetry/t.js';\nexport const b = t;\n",
      'src/platform/telemetry/t.ts': "import { b } from '../metrics/m.js';\nexport const t = b;\n",
      'src/platform/loose.ts': 'export {};\n',
    };
    await inFixture(files, async (root) => {
      expect(againstLayers(root).sort()).toEqual([
        'src/platform/db/lazy.ts -> src/platform/lifecycle/boot.ts',
        'src/platform/db/multi.ts -> src/platform/metrics/m.ts',
        'src/platform/db/typeof.ts -> src/platform/jobs/tick.ts',
        'src/platform/loose.ts is in no layer',
        'src/platform/util/leaf.ts -> src/platform/db/pool.ts',
        'src/platform/util/reexport.ts -> src/platform/http/route.ts',
        'src/platform/util/types.ts -> src/platform/db/pool.ts',
      ]);
    });
  });

  it('a runtime entry imports only src/platform/** and src/app/module.ts', async () => {
    expect(await runtimeBeyondWiring(repoRoot, RUNTIME_ENTRIES)).toEqual([]);
  });

  it('no Workers entry reaches tools/ (the development sandbox), Node does', async () => {
    const reached = async (entry: string) =>
      (await importsFrom(repoRoot, [entry])).filter((i) => i.to.startsWith('tools/')).map((i) => i.to);
    for (const entry of WORKER_ENTRIES) expect(await reached(entry)).toEqual([]);
    expect(await reached('src/runtime/node.ts')).toContain('tools/xero-sandbox/app.ts');
  });

  it('the checks see static, re-exported, dynamic and nested imports, and resolve paths', async () => {
    const files = {
      'src/app/module.ts': 'export const module = 1;\n',
      'src/app/routes.ts': 'export const routes = 1;\n',
      'src/platform/clean.ts': "import { helper } from './nested/helper.js';\nexport const x = helper;\n",
      'src/platform/nested/helper.ts': 'export const helper = 1;\n',
      'src/platform/static.ts': "import { routes } from '../app/routes.js';\nexport const s = routes;\n",
      'src/platform/reexport.ts': "export * from '../app/routes.js';\n",
      'src/platform/lazy.ts': "export const load = () => import('../app/routes.js');\n",
      'src/platform/deep/inner.ts': "import '../../app/module.js';\n",
      // A type-only import is erased, as in the build: not a runtime dependency.
      'src/platform/types.ts':
        "import type { routes } from '../app/routes.js';\nexport type R = typeof routes;\n",
      'src/runtime/node.ts': "import '../platform/clean.js';\nimport '../app/module.js';\n",
      'src/runtime/bun.ts': "import { hostname } from 'node:os';\nimport '../app/routes.js';\nhostname();\n",
      'src/runtime/worker.ts': "import './helper.js';\nimport 'hono';\n",
      'src/runtime/helper.ts': 'export {};\n',
      // The Node/Bun module (the development sandbox) is refused to a Workers entry.
      'src/runtime/worker-hyperdrive.ts': "import '../app/dev/sandbox.js';\n",
      'src/app/dev/sandbox.ts': 'export {};\n',
    };
    await inFixture(files, async (root) => {
      expect((await platformIntoApp(root)).sort()).toEqual([
        'src/platform/deep/inner.ts -> src/app/module.ts (import-statement)',
        'src/platform/lazy.ts -> src/app/routes.ts (dynamic-import)',
        'src/platform/reexport.ts -> src/app/routes.ts (import-statement)',
        'src/platform/static.ts -> src/app/routes.ts (import-statement)',
      ]);
      expect((await runtimeBeyondWiring(root, RUNTIME_ENTRIES)).sort()).toEqual([
        'src/runtime/bun.ts -> node:os (import-statement)',
        'src/runtime/bun.ts -> src/app/routes.ts (import-statement)',
        'src/runtime/worker-hyperdrive.ts -> src/app/dev/sandbox.ts (import-statement)',
        'src/runtime/worker.ts -> hono (import-statement)',
        'src/runtime/worker.ts -> src/runtime/helper.ts (import-statement)',
      ]);
    });
  });
});
