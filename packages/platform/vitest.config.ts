import { readFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';

// The package's `exports` name its build (dist/); its tests run on the sources, as the workspace does
// (the root tsconfig's paths): each entry by its name, aliased to the source its build is made from.
const manifest = JSON.parse(readFileSync(new URL('package.json', import.meta.url), 'utf8')) as {
  name: string;
  exports: Record<string, string | { default: string }>;
};
const sourceAliases = Object.entries(manifest.exports).flatMap(([key, target]) => {
  const built = typeof target === 'string' ? target : target.default;
  if (!built.startsWith('./dist/')) return [];
  const name = key === '.' ? manifest.name : `${manifest.name}${key.slice(1)}`;
  const source = new URL(built.replace(/^\.\/dist\//, './src/').replace(/\.js$/, '.ts'), import.meta.url);
  return [{ find: new RegExp(`^${name.replaceAll('/', '\\/')}$`), replacement: source.pathname }];
});

// The package's own tests: pure logic and small real sockets, no database server, no build. The root
// `npm test` runs them as the project `fast-platform` (so `npm run test:fast` does too); here alone:
// `npm test -w @honest-health/platform`.
export default defineConfig({
  resolve: { alias: sourceAliases },
  test: {
    name: 'fast-platform',
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    // The files share their workers' modules, as the root's fast layer does.
    isolate: false,
    testTimeout: 20_000,
  },
});
