// The Worker exactly as `npm run build:worker` bundles it (wrangler's dry run, offline), and Miniflare
// instances that run it with wrangler.toml's compatibility settings.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { Miniflare } from 'miniflare';
import { parse } from 'smol-toml';
import { repoRoot } from '../../test/support/server.js';
import { bundleModule } from '../../test/support/wrangler.js';

export interface WorkerBundle {
  dir: string;
  script: string;
  rawBytes: number;
  /** gzip level 9, as tools/worker-size.mjs reports it. */
  gzipBytes: number;
  compatibilityDate: string;
  compatibilityFlags: string[];
}

/** Bundles the Worker of `sourceDir` (a checkout with wrangler.toml; this repository by default). */
export function buildWorkerBundle(outdir: string, sourceDir = repoRoot): WorkerBundle {
  execFileSync(resolve(repoRoot, 'node_modules/.bin/wrangler'), ['deploy', '--dry-run', '--outdir', outdir], {
    cwd: sourceDir,
    env: { ...process.env, XDG_CONFIG_HOME: join(outdir, 'config'), WRANGLER_SEND_METRICS: 'false' },
    stdio: 'pipe',
  });
  return readWorkerBundle(outdir, sourceDir);
}

/** The bundle wrangler already wrote to `outdir`, for the Worker of `sourceDir`. */
export function readWorkerBundle(outdir: string, sourceDir = repoRoot): WorkerBundle {
  const script = join(outdir, 'worker.js');
  const code = readFileSync(script);
  const toml = parse(readFileSync(resolve(sourceDir, 'wrangler.toml'), 'utf8')) as {
    compatibility_date?: string;
    compatibility_flags?: string[];
  };
  if (!toml.compatibility_date) throw new Error('wrangler.toml has no compatibility_date');
  return {
    dir: outdir,
    script,
    rawBytes: code.length,
    gzipBytes: gzipSync(code, { level: 9 }).length,
    compatibilityDate: toml.compatibility_date,
    compatibilityFlags: toml.compatibility_flags ?? [],
  };
}

/**
 * A new workerd process running the bundle; bindings are the Worker's vars and secrets. With `onLine`,
 * each line workerd writes (the Worker's console, so its JSON log lines) goes there instead of this
 * process's stdout and stderr.
 */
export function startMiniflare(
  bundle: WorkerBundle,
  bindings: Record<string, string>,
  onLine?: (line: string) => void,
): Miniflare {
  return new Miniflare({
    ...bundleModule(bundle.dir, basename(bundle.script)),
    compatibilityDate: bundle.compatibilityDate,
    compatibilityFlags: bundle.compatibilityFlags,
    bindings,
    ...(onLine && {
      handleRuntimeStdio: (stdout: Readable, stderr: Readable) => {
        for (const stream of [stdout, stderr]) createInterface({ input: stream }).on('line', onLine);
      },
    }),
  });
}

/** A database URL as the Worker sees it behind the local Neon proxy (which ignores the host). */
export function neonUrl(url: string): string {
  const u = new URL(url);
  u.host = 'db.neon.invalid';
  return u.toString();
}
