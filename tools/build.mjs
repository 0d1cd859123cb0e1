// Bundles each runtime entry with esbuild; packages stay external (installed by npm).
import { rmSync } from 'node:fs';
import { build } from 'esbuild';

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
  packages: 'external',
  sourcemap: true,
  logLevel: 'warning',
});
