// Prints the Worker bundle's size, raw and gzipped, after `wrangler deploy --dry-run --outdir dist/worker`,
// and fails when the gzip size is over its limit (WORKER_GZIP_MAX_KIB, default 144;
// WORKER_GZIP_BUDGET_KIB, its old name, is still read).
// With --why it first prints what the bundle is made of, per package: the bytes each put into the output
// (from the source map, so minified as shipped) and their gzip size on their own. The gzip column adds up
// to about the total, so it says what removing a package would roughly save. Reads dist/worker/worker.js,
// its .map and, to attribute files that packages map back to their own sources, wrangler's
// --metafile (dist/worker/bundle-meta.json).
import { existsSync, readFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';

// WORKER_BUNDLE names another entry's output (npm run build:worker:hyperdrive).
const BUNDLE = process.env.WORKER_BUNDLE ?? 'dist/worker/worker.js';
const DIR = BUNDLE.slice(0, BUNDLE.lastIndexOf('/'));
const MAX_KIB = Number(process.env.WORKER_GZIP_MAX_KIB ?? process.env.WORKER_GZIP_BUDGET_KIB ?? 144);
const kib = (n) => (n / 1024).toFixed(1);
const gzipSize = (text) => gzipSync(text, { level: 9 }).length;

const bundle = readFileSync(BUNDLE);
const gzip = gzipSize(bundle);
if (process.argv.includes('--why')) console.log(composition(bundle.toString('utf8')));
console.log(JSON.stringify({ worker_bundle_kib: Number(kib(bundle.length)), gzip_kib: Number(kib(gzip)) }));
if (gzip / 1024 > MAX_KIB) {
  console.error(`worker bundle is ${kib(gzip)} KiB gzipped, over the ${MAX_KIB} KiB limit (see --why)`);
  process.exitCode = 1;
}

function composition(code) {
  const map = JSON.parse(readFileSync(`${BUNDLE}.map`, 'utf8'));
  const metaPath = `${DIR}/bundle-meta.json`;
  const inputs = existsSync(metaPath)
    ? Object.keys(
        Object.values(JSON.parse(readFileSync(metaPath, 'utf8')).outputs).find((o) => o.entryPoint)?.inputs ??
          {},
      )
    : [];
  const owners = map.sources.map((source) =>
    owner(relative('.', resolve(map.sourceRoot ?? DIR, source)), inputs),
  );
  const text = new Map();
  const add = (who, piece) => text.set(who, (text.get(who) ?? '') + piece);
  const lines = code.split('\n');
  decodeMappings(map.mappings).forEach((segments, i) => {
    const line = lines[i] ?? '';
    add('(unmapped)', line.slice(0, segments[0]?.column));
    segments.forEach((s, j) => {
      add(
        s.source === undefined ? '(unmapped)' : owners[s.source],
        line.slice(s.column, segments[j + 1]?.column),
      );
    });
  });
  const rows = [...text]
    .map(([who, t]) => ({ who, raw: Buffer.byteLength(t), gzip: gzipSize(t) }))
    .sort((a, b) => b.gzip - a.gzip);
  const width = Math.max(...rows.map((r) => r.who.length));
  return [
    `${'package'.padEnd(width)}  raw KiB  gzip KiB alone`,
    ...rows.map((r) => `${r.who.padEnd(width)}  ${kib(r.raw).padStart(7)}  ${kib(r.gzip).padStart(14)}`),
  ].join('\n');
}

/** The package (or src/ folder, the platform's included) a source file belongs to. */
function owner(path, inputs) {
  const pkg = (p) => p.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//)?.[1];
  const src = path.match(/(?:^|\/)((?:packages\/[^/]+\/)?src\/[^/]+)\//)?.[1];
  if (!path.includes('node_modules/')) return src ?? path;
  // Packages that ship source maps point at sources they do not ship (drizzle-orm: node_modules/src/…,
  // @sentry/*: node_modules/@sentry/src/…): find the bundled file with the same path below its src/.
  const tail = path.replace(/^.*?\/src\//, '').replace(/\.ts$/, '.js');
  const name = pkg(path);
  const scope = name?.startsWith('@') ? `node_modules/${name.split('/')[0]}/` : 'node_modules/';
  const bundled = inputs.find((i) => i.endsWith(`/${tail}`) && i.includes(scope));
  return bundled && (name === 'src' || name?.endsWith('/src')) ? pkg(bundled) : (name ?? path);
}

/** Source map v3 mappings: per output line, segments of [column, source index]. */
function decodeMappings(mappings) {
  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const out = [];
  let source = 0;
  for (const line of mappings.split(';')) {
    const segments = [];
    let column = 0;
    for (const segment of line.split(',')) {
      if (!segment) continue;
      const fields = [];
      let value = 0;
      let shift = 0;
      for (const ch of segment) {
        const digit = B64.indexOf(ch);
        value += (digit & 31) << shift;
        if (digit & 32) shift += 5;
        else {
          fields.push(value & 1 ? -(value >>> 1) : value >>> 1);
          value = 0;
          shift = 0;
        }
      }
      column += fields[0];
      if (fields.length >= 4) source += fields[1];
      // Source line/column deltas (fields 2, 3) do not matter here, only which source a column is from.
      segments.push({ column, source: fields.length >= 4 ? source : undefined });
    }
    out.push(segments);
  }
  return out;
}
