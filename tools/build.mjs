// Bundles each runtime entry with esbuild; packages stay external (installed by npm), but two.
import { readFileSync, rmSync } from 'node:fs';
import { build } from 'esbuild';

// drizzle-orm is bundled. It ships hundreds of ES modules under one 175 KB package.json whose
// `exports` map Node 24's ESM loader reads back for every module it resolves (package_json_reader's
// `get` in a CPU profile): importing it took 0.4 s on Node 24 against 0.15 s on Node 20, most of the
// server's boot. Bundled, the boot never resolves a drizzle-orm file.
// The platform is a workspace package whose exports are TypeScript sources: it is bundled too, and its
// own dependencies stay external like the app's.
const PLATFORM = '@honest-health/platform';
const BUNDLED = new Set(['drizzle-orm', PLATFORM]);
const manifest = (path) => JSON.parse(readFileSync(path, 'utf8'));
const app = manifest('package.json');
const platform = manifest('packages/platform/package.json');
const external = [
  ...new Set([app.dependencies, platform.dependencies, platform.peerDependencies].flatMap(Object.keys)),
]
  .filter((name) => !BUNDLED.has(name))
  .flatMap((name) => [name, `${name}/*`]);

// Code splitting keeps `import()` lazy: without it esbuild inlines a dynamically imported module and
// hoists that module's package imports to the top of node.js, so Neon, its Drizzle drivers and the
// Sentry SDK would load at every boot, whatever the configured driver and DSN.
rmSync('dist/chunks', { recursive: true, force: true });
await build({
  entryPoints: { node: 'src/runtime/node.ts' },
  outdir: 'dist',
  bundle: true,
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
  platform: 'node',
  format: 'esm',
  target: 'node24',
  external,
  sourcemap: true,
  logLevel: 'warning',
});
