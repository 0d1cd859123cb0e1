// `@honest-health/platform/build`: an app's Node entries bundled with esbuild, the platform and
// drizzle-orm inside, every other package external (installed by npm beside dist/). JavaScript, the
// one entry that is: the build runs on plain Node, before anything has compiled TypeScript. Node only.
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';

// drizzle-orm is bundled. It ships hundreds of ES modules under one large package.json whose
// `exports` map Node 24's ESM loader reads back for every module it resolves, most of a server's boot
// (docs/boot.md). Bundled, the boot never resolves a drizzle-orm file.
// The platform is bundled too (its built dist/ when installed; its sources in this repository, where
// the root tsconfig's paths lead esbuild), and its own dependencies stay external like the app's.
const PLATFORM = '@honest-health/platform';
const BUNDLED = new Set(['drizzle-orm', PLATFORM]);

const manifest = (path) => JSON.parse(readFileSync(path, 'utf8'));
const platform = manifest(new URL('../../package.json', import.meta.url));

/** Every package the app or the platform names, but those bundled: each and its subpaths. */
export function externalPackages(app) {
  return [
    ...new Set(
      [app.dependencies, platform.dependencies, platform.peerDependencies].flatMap((deps) =>
        Object.keys(deps ?? {}),
      ),
    ),
  ]
    .filter((name) => !BUNDLED.has(name))
    .flatMap((name) => [name, `${name}/*`]);
}

export async function buildNodeApp({ root, entryPoints, outdir = 'dist' }) {
  // Code splitting keeps `import()` lazy: without it esbuild inlines a dynamically imported module and
  // hoists that module's package imports to the top of the entry, so Neon, its Drizzle drivers and the
  // Sentry SDK would load at every boot, whatever the configured driver and DSN. Chunks of an earlier
  // build would pile up beside the new ones.
  rmSync(join(root, outdir, 'chunks'), { recursive: true, force: true });
  return build({
    absWorkingDir: root,
    entryPoints,
    outdir,
    bundle: true,
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    platform: 'node',
    format: 'esm',
    target: 'node24',
    external: externalPackages(manifest(join(root, 'package.json'))),
    sourcemap: true,
    logLevel: 'warning',
  });
}
