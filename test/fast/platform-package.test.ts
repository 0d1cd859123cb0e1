// The platform is a package of its own (packages/platform): it type-checks with its own tsconfig from a
// copy with no app beside it; built there, every entry of its `exports` map resolves to its build for
// TypeScript and esbuild; in this repository every entry resolves to its source (the root tsconfig's
// paths) for esbuild (what tools/build.mjs and wrangler bundle with) and for Vite (vitest); and its
// Node-only entries (/tools, /build) never reach a Worker bundle.
import { execFileSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BuildOptions, build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/server.js';

const NAME = '@honest-health/platform';
const PACKAGE_DIR = join(repoRoot, 'packages/platform');
type Target = { types: string; default: string };
const manifest = JSON.parse(readFileSync(join(PACKAGE_DIR, 'package.json'), 'utf8')) as {
  exports: Record<string, Target | string>;
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
};
const entries = Object.entries(manifest.exports).filter(
  (entry): entry is [string, Target] => entry[0] !== './package.json',
);
const specifier = (key: string) => (key === '.' ? NAME : `${NAME}${key.slice(1)}`);
/** The file an entry's build is made from (relative to the package): itself for the JavaScript one. */
const sourceOf = (target: Target) =>
  target.default
    .replace(/^\.\/dist\//, 'src/')
    .replace(/\.js$/, '.ts')
    .replace(/^\.\//, '');
const sourceOfKey = (key: string) => join(PACKAGE_DIR, sourceOf(manifest.exports[key] as Target));
const tsc = join(repoRoot, 'node_modules/.bin/tsc');

let dir: string;
beforeAll(() => {
  // The package alone: a copy, and the installed dependencies, but no src/, test/ or tools/ of the app.
  // The copy is what `@honest-health/platform` names in it.
  dir = mkdtempSync(join(tmpdir(), 'platform-alone-'));
  cpSync(PACKAGE_DIR, join(dir, 'platform'), { recursive: true });
  mkdirSync(join(dir, 'node_modules/@honest-health'), { recursive: true });
  for (const name of readdirSync(join(repoRoot, 'node_modules'))) {
    if (name !== '@honest-health')
      symlinkSync(join(repoRoot, 'node_modules', name), join(dir, 'node_modules', name));
  }
  symlinkSync(join(dir, 'platform'), join(dir, 'node_modules', NAME));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The files esbuild reaches from `options`, the package's dependencies external. */
async function bundledInputs(options: Pick<BuildOptions, 'stdin' | 'entryPoints' | 'absWorkingDir'>) {
  const deps = Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies });
  const { metafile } = await build({
    ...options,
    bundle: true,
    write: false,
    metafile: true,
    platform: 'node',
    format: 'esm',
    external: [...deps, ...deps.map((d) => `${d}/*`), 'cloudflare:*'],
    logLevel: 'silent',
  });
  return Object.keys(metafile.inputs);
}

const typeCheck = (project: string) => {
  try {
    execFileSync(tsc, ['-p', project], { encoding: 'utf8', stdio: 'pipe' });
    return '';
  } catch (err) {
    return String((err as { stdout?: string }).stdout ?? err);
  }
};

describe('the platform package', () => {
  it("is MIT, the repository's own license, word for word (npm packs LICENSE whatever `files` says)", () => {
    const license = readFileSync(join(PACKAGE_DIR, 'LICENSE'), 'utf8');
    expect(license).toBe(readFileSync(join(repoRoot, 'LICENSE'), 'utf8'));
    expect(license).toMatch(
      /^MIT License\n\nCopyright \(c\) 2026 The honest-health authors\n\nPermission is/,
    );
    expect(license).toMatch(/IN NO EVENT SHALL THE\nAUTHORS OR COPYRIGHT HOLDERS BE LIABLE/);
    expect(JSON.parse(readFileSync(join(PACKAGE_DIR, 'package.json'), 'utf8')).license).toBe('MIT');
  });

  it('names no app: no source mentions the product, Xero or invoices (the package is for any app)', () => {
    const named: string[] = [];
    const walk = (folder: string) => {
      for (const entry of readdirSync(folder, { withFileTypes: true })) {
        const path = join(folder, entry.name);
        if (entry.isDirectory()) walk(path);
        else if (entry.name.endsWith('.ts')) {
          readFileSync(path, 'utf8')
            .split('\n')
            .forEach((line, i) => {
              // The package's own name is the one use of the word allowed.
              if (/honest(?!-health\/platform)|xero|invoice/i.test(line)) named.push(`${path}:${i + 1}`);
            });
        }
      }
    };
    walk(join(PACKAGE_DIR, 'src'));
    expect(named).toEqual([]);
  });

  it('type-checks alone, with its own tsconfig, from a copy with no app beside it', () => {
    expect(existsSync(join(dir, 'platform/tsconfig.json'))).toBe(true);
    expect(typeCheck(join(dir, 'platform'))).toBe('');
  });

  it('names no internals, and for every entry its build in dist/ (or a JavaScript source) and types', () => {
    expect(
      Object.keys(manifest.exports).filter((key) => key.includes('internal') || key.includes('*')),
    ).toEqual([]);
    expect(entries.map(([key]) => key)).toEqual(
      expect.arrayContaining([
        '.',
        './node',
        './bun',
        './worker',
        './drivers/pg',
        './drivers/neon',
        './tools',
        './build',
      ]),
    );
    for (const [key, target] of entries) {
      expect(Object.keys(target), key).toEqual(['types', 'default']);
      if (target.default.endsWith('.mjs')) {
        expect(existsSync(join(PACKAGE_DIR, target.default)), key).toBe(true);
        expect(existsSync(join(PACKAGE_DIR, target.types)), key).toBe(true);
      } else {
        expect(target.default, key).toMatch(/^\.\/dist\/exports\/.*\.js$/);
        expect(target.types, key).toBe(target.default.replace(/\.js$/, '.d.ts'));
        expect(existsSync(join(PACKAGE_DIR, sourceOf(target))), key).toBe(true);
      }
    }
  });

  it("is resolved to its sources in this repository by the root tsconfig's paths, entry for entry", () => {
    const { compilerOptions } = JSON.parse(
      readFileSync(join(repoRoot, 'tsconfig.json'), 'utf8').replace(/^\s*\/\/.*$/gm, ''),
    ) as { compilerOptions: { paths: Record<string, string[]> } };
    const paths = Object.entries(compilerOptions.paths).filter(([name]) => !name.includes('*'));
    const built = entries.filter(([, target]) => target.default.startsWith('./dist/'));
    expect(paths.sort()).toEqual(
      built.map(([key, target]) => [specifier(key), [`./packages/platform/${sourceOf(target)}`]]).sort(),
    );
  });

  it('built, resolves every entry by name to its build for TypeScript and esbuild, in a consumer of the copy', async () => {
    execFileSync(tsc, ['-p', join(dir, 'platform/tsconfig.build.json')], { encoding: 'utf8', stdio: 'pipe' });
    const consumer = join(dir, 'consumer');
    mkdirSync(consumer);
    const imports = entries.map(([key], i) => `import * as e${i} from '${specifier(key)}';\nvoid e${i};\n`);
    writeFileSync(join(consumer, 'index.ts'), imports.join(''));
    const base = JSON.parse(
      readFileSync(join(PACKAGE_DIR, 'tsconfig.json'), 'utf8').replace(/^\s*\/\/.*$/gm, ''),
    );
    writeFileSync(join(consumer, 'tsconfig.json'), JSON.stringify({ ...base, include: ['index.ts'] }));
    expect(typeCheck(consumer)).toBe('');
    // No source of the package is left to resolve to: the declarations stand alone.
    expect(existsSync(join(dir, 'platform/dist/exports/index.d.ts'))).toBe(true);

    const inputs = await bundledInputs({ entryPoints: [join(consumer, 'index.ts')], absWorkingDir: dir });
    for (const [, target] of entries) expect(inputs).toContain(join('platform', target.default));
  });

  it('resolves every entry by name to its source for esbuild (the Node build and wrangler)', async () => {
    const inputs = await bundledInputs({
      stdin: {
        contents: entries
          .map(([key]) => `export * as e${key.replace(/\W/g, '_')} from '${specifier(key)}';`)
          .join('\n'),
        resolveDir: repoRoot,
        loader: 'ts',
      },
    });
    for (const [, target] of entries) expect(inputs).toContain(join('packages/platform', sourceOf(target)));
  });

  it('keeps its Node-only entries (/tools, /build) out of every Worker bundle', async () => {
    const deps = Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies });
    const inputsOf = async (entryPoints: string[]) =>
      Object.keys(
        (
          await build({
            absWorkingDir: repoRoot,
            entryPoints,
            bundle: true,
            write: false,
            metafile: true,
            outdir: join(dir, 'out'),
            platform: 'node',
            format: 'esm',
            external: [...deps, ...deps.map((d) => `${d}/*`), 'cloudflare:*'],
            logLevel: 'silent',
          })
        ).metafile.inputs,
      );
    const nodeOnly = [
      'packages/platform/src/exports/tools.ts',
      'packages/platform/src/exports/build.mjs',
      'packages/platform/src/db/migrations-bundle.ts',
      'packages/platform/src/db/deploy-migrate.ts',
    ];
    // The check sees them where they are imported.
    const tools = await inputsOf([sourceOfKey('./tools'), sourceOfKey('./build')]);
    expect(tools).toEqual(expect.arrayContaining(nodeOnly));
    const workers = await inputsOf([
      'src/runtime/worker.ts',
      'src/runtime/worker-hyperdrive.ts',
      'examples/notes/src/worker.ts',
    ]);
    expect(workers).toContain('packages/platform/src/exports/worker.ts');
    expect(workers.filter((input) => nodeOnly.includes(input))).toEqual([]);
  });

  it("keeps the error-tracking SDK out of the app's Worker bundles: it is in the errors Tail Worker's", async () => {
    // What the output holds: a lazily imported module the bundle never reaches is resolved (listed in
    // the metafile's inputs) but tree-shaken away.
    const inputsOf = async (entryPoint: string) => {
      const { metafile } = await build({
        absWorkingDir: repoRoot,
        entryPoints: [entryPoint],
        bundle: true,
        write: false,
        metafile: true,
        outdir: join(dir, 'out-sdk'),
        platform: 'node',
        format: 'esm',
        external: ['cloudflare:*', 'pg-native'],
        logLevel: 'silent',
      });
      return Object.values(metafile.outputs).flatMap((o) =>
        Object.entries(o.inputs)
          .filter(([, i]) => i.bytesInOutput > 0)
          .map(([input]) => input),
      );
    };
    const sdk = (input: string) => input.includes('@sentry/');
    for (const entry of ['src/runtime/worker.ts', 'src/runtime/worker-hyperdrive.ts']) {
      expect((await inputsOf(entry)).filter(sdk), entry).toEqual([]);
    }
    expect((await inputsOf('src/runtime/worker-errors.ts')).some(sdk)).toBe(true);
  });

  it('resolves and loads every entry by name for Vite', async () => {
    for (const [key] of entries) {
      const loaded = (await import(/* @vite-ignore */ specifier(key))) as object;
      expect(Object.keys(loaded).length, key).toBeGreaterThan(0);
    }
  });
});
