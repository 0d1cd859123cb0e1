// The platform as a user installs it: `npm pack` of packages/platform, the notes example copied out of
// the repository with its dependency pointed at that tarball, `npm install` (npm's cache is warm:
// --prefer-offline) and the example's own `npm test`; then plain Node 24, without a loader, and Bun
// import every exported subpath from the installed copy. The copy sees nothing of this repository: no
// workspace, no tsconfig paths, no node_modules/.bin of ours on PATH, no npm_* variables of this run.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, relative, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from './support/server.js';

const PACKAGE_DIR = join(repoRoot, 'packages/platform');
const manifest = JSON.parse(readFileSync(join(PACKAGE_DIR, 'package.json'), 'utf8')) as {
  name: string;
  exports: Record<string, unknown>;
};
const subpaths = Object.keys(manifest.exports)
  .filter((key) => key !== './package.json')
  .map((key) => (key === '.' ? manifest.name : `${manifest.name}${key.slice(1)}`));

let dir: string;
let example: string;
let tarball: string;
let packed: string[];

// The environment of a user's shell: this run's npm variables and our binaries left out.
const outsideEnv = (): NodeJS.ProcessEnv => {
  const ours = resolve(repoRoot, 'node_modules/.bin');
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([key]) => !/^npm_/i.test(key) && !['NODE_OPTIONS', 'FORCE_COLOR'].includes(key),
    ),
  );
  env.NO_COLOR = '1';
  env.PATH = (process.env.PATH ?? '')
    .split(delimiter)
    .filter((entry) => resolve(entry) !== ours)
    .join(delimiter);
  return env;
};

const run = (command: string, args: string[], cwd: string) =>
  execFileSync(command, args, { cwd, env: outsideEnv(), encoding: 'utf8', stdio: 'pipe' });

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'platform-tarball-'));
  // `prepack` builds dist/ first; its output precedes the JSON.
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', dir], {
    cwd: PACKAGE_DIR,
    encoding: 'utf8',
    stdio: 'pipe',
  });
  const [info] = JSON.parse(out.slice(out.indexOf('\n[') + 1)) as {
    filename: string;
    files: { path: string }[];
  }[];
  if (info === undefined) throw new Error(`npm pack printed no JSON:\n${out}`);
  tarball = join(dir, info.filename);
  packed = info.files.map((f) => f.path);

  example = join(dir, 'notes');
  const source = join(repoRoot, 'examples/notes');
  const local = new Set(['node_modules', 'dist', '.data', '.wrangler']);
  cpSync(source, example, {
    recursive: true,
    filter: (from) =>
      !relative(source, from)
        .split('/')
        .some((part) => local.has(part)),
  });
  const pkg = JSON.parse(readFileSync(join(example, 'package.json'), 'utf8'));
  pkg.dependencies[manifest.name] = `file:${tarball}`;
  writeFileSync(join(example, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
  run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], example);
}, 240_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the platform from its tarball, in an app outside the repository', () => {
  it('packs built JavaScript, declarations, a LICENSE and a README, and exports no internals', () => {
    expect(packed).toEqual(expect.arrayContaining(['LICENSE', 'README.md', 'package.json']));
    expect(packed).toContain('dist/exports/index.js');
    expect(packed).toContain('dist/exports/index.d.ts');
    expect(packed.filter((f) => f.endsWith('.d.ts')).length).toBeGreaterThan(20);
    // No TypeScript source: Node strips no types under node_modules.
    expect(packed.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);
    const installed = JSON.parse(
      readFileSync(join(example, 'node_modules', manifest.name, 'package.json'), 'utf8'),
    ) as { exports: Record<string, unknown>; private?: boolean };
    expect(installed.private).toBeUndefined();
    expect(readFileSync(join(example, 'node_modules', manifest.name, 'LICENSE'), 'utf8')).toBe(
      readFileSync(join(repoRoot, 'LICENSE'), 'utf8'),
    );
    expect(Object.keys(installed.exports).filter((key) => /internal|\*/.test(key))).toEqual([]);
  });

  it("passes the example's own `npm test`", () => {
    // A failing test fails the command, and execFileSync throws with its output (uncoloured: NO_COLOR).
    const out = run('npm', ['test'], example);
    const summary = out.split('\n').filter((line) => /^\s*(Test Files|Tests)\s/.test(line));
    console.log(`npm test in the copy outside the repository:\n${summary.join('\n')}`);
    expect(summary.join('\n')).toMatch(/Test Files\s+\d+ passed/);
    expect(summary.join('\n')).not.toMatch(/failed/);
  }, 240_000);

  it('imports every exported subpath under plain Node 24, without a loader, and under Bun', () => {
    const check = join(example, 'import-every-entry.mjs');
    writeFileSync(
      check,
      `for (const name of ${JSON.stringify(subpaths)}) {\n` +
        '  const entry = await import(name);\n' +
        "  if (Object.keys(entry).length === 0) throw new Error(name + ' exports nothing');\n" +
        "  console.log(name + ': ' + Object.keys(entry).length + ' exports');\n" +
        '}\n',
    );
    const node = join(example, 'node_modules/node/bin/node');
    expect(run(node, ['--version'], example).trim()).toMatch(/^v24\./);
    const underNode = run(node, [check], example);
    console.log(`plain Node 24 from the installed copy:\n${underNode}`);
    expect(underNode.trim().split('\n')).toHaveLength(subpaths.length);
    const underBun = run(join(repoRoot, 'node_modules/.bin/bun'), [check], example);
    expect(underBun.trim().split('\n')).toHaveLength(subpaths.length);
  });
});
