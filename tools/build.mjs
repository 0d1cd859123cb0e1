// Bundles each runtime entry with esbuild; packages stay external (installed by npm).
import { build } from 'esbuild';

await build({
  entryPoints: { node: 'src/runtime/node.ts' },
  outdir: 'dist',
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  packages: 'external',
  sourcemap: true,
  logLevel: 'warning',
});
