// `npm run build`: the Node entry bundled to dist/node.js by the platform's build (what it bundles and
// why: packages/platform/src/exports/build.mjs).
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildNodeApp } from '@honest-health/platform/build';

await buildNodeApp({
  root: join(dirname(fileURLToPath(import.meta.url)), '..'),
  entryPoints: { node: 'src/runtime/node.ts' },
  outdir: 'dist',
});
