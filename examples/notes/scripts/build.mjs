// `npm run build`: src/node.ts -> dist/node.js, what production runs (`node dist/node.js`). The
// platform's exports are TypeScript sources, so it is bundled, with drizzle-orm; every other package
// stays external, installed by npm beside dist/.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const PLATFORM = '@honest-health/platform';
const BUNDLED = new Set(['drizzle-orm', PLATFORM]);
const manifest = (path) => JSON.parse(readFileSync(path, 'utf8'));
const app = manifest(join(root, 'package.json'));
const platform = manifest(createRequire(import.meta.url).resolve(`${PLATFORM}/package.json`));
const external = [
  ...new Set([app.dependencies, platform.dependencies, platform.peerDependencies].flatMap(Object.keys)),
]
  .filter((name) => !BUNDLED.has(name))
  .flatMap((name) => [name, `${name}/*`]);

await build({
  absWorkingDir: root,
  entryPoints: { node: 'src/node.ts' },
  outdir: 'dist',
  bundle: true,
  // Keeps the platform's lazy imports lazy: the drivers and SDKs a configuration does not use never load.
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
  platform: 'node',
  format: 'esm',
  target: 'node24',
  external,
  sourcemap: true,
  logLevel: 'warning',
});
