// Prints the Worker bundle's size, raw and gzipped, after `wrangler deploy --dry-run --outdir dist/worker`.
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

const bundle = readFileSync('dist/worker/worker.js');
const kib = (n) => (n / 1024).toFixed(1);
console.log(
  JSON.stringify({
    worker_bundle_kib: Number(kib(bundle.length)),
    gzip_kib: Number(kib(gzipSync(bundle, { level: 9 }).length)),
  }),
);
