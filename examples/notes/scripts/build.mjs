// `npm run build`: src/node.ts -> dist/node.js, what production runs (`node dist/node.js`), by the
// platform's build: the platform and drizzle-orm bundled, every other package external.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildNodeApp } from '@honest-health/platform/build';

await buildNodeApp({
  root: join(dirname(fileURLToPath(import.meta.url)), '..'),
  entryPoints: { node: 'src/node.ts' },
});
