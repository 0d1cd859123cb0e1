// The product's builds hold no development fake: dist/ (what `npm run build` writes and the Docker
// image runs; the global setup builds it) and the Worker bundles as wrangler builds them. The fakes
// and development mode live in dev/ (ARCHITECTURE.md, "Platform and app"); test/fast/boundaries.test.ts checks
// the imports, this the files that ship.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './support/server.js';
import { workerBundle } from './support/wrangler.js';

/** Strings only the Xero sandbox has (its log prefix and its default tenant), which minifying keeps. */
const SANDBOX_TEXT = ['xero-sandbox:', 'Demo Company (Sandbox)'];
const devModule = (path: string) => /^(dev|cli)\//.test(path.replace(/\\/g, '/').replace(/^(\.\.\/)+/, ''));

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).map((f) => join(dir, f));
}

describe('the fake Xero is in no build of the product', () => {
  it('dist/: no source under dev/ or cli/ in its source maps, no sandbox text in its code', () => {
    const files = filesUnder(join(repoRoot, 'dist')).filter((f) => /\.js(\.map)?$/.test(f));
    const maps = files.filter((f) => f.endsWith('.js.map'));
    expect(maps.map((f) => f.slice(repoRoot.length + 1))).toContain('dist/node.js.map');
    const sources = maps.flatMap(
      (f) => (JSON.parse(readFileSync(f, 'utf8')) as { sources: string[] }).sources,
    );
    expect(sources.some((s) => s.includes('src/app/'))).toBe(true);
    expect(sources.filter(devModule)).toEqual([]);
    for (const file of files.filter((f) => f.endsWith('.js'))) {
      const text = readFileSync(file, 'utf8');
      for (const marker of SANDBOX_TEXT) expect(text.includes(marker), `${marker} in ${file}`).toBe(false);
    }
  });

  it.each([
    ['worker', [], 'worker.js'],
    ['worker-hyperdrive', ['src/runtime/worker-hyperdrive.ts'], 'worker-hyperdrive.js'],
  ])(
    'the %s bundle: no input under dev/ or cli/ in its metafile, no sandbox text',
    async (_name, args, bundle) => {
      const dir = await workerBundle(args);
      const { inputs } = JSON.parse(readFileSync(join(dir, 'bundle-meta.json'), 'utf8')) as {
        inputs: Record<string, unknown>;
      };
      expect(Object.keys(inputs).some((p) => p.includes('src/app/'))).toBe(true);
      expect(Object.keys(inputs).filter(devModule)).toEqual([]);
      const text = readFileSync(join(dir, bundle), 'utf8');
      for (const marker of SANDBOX_TEXT) expect(text.includes(marker), marker).toBe(false);
    },
    120_000,
  );
});
