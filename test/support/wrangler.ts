// Worker bundles as wrangler builds them, for the tests that run them in workerd through Miniflare.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Miniflare } from 'miniflare';
import { parse } from 'smol-toml';
import { buildOnce } from './build-once.js';
import { repoRoot } from './server.js';

/** wrangler.toml's runtime settings, which Miniflare is given as the deployed Worker gets them. */
export const wranglerSettings = parse(readFileSync(join(repoRoot, 'wrangler.toml'), 'utf8')) as {
  compatibility_date: string;
  compatibility_flags: string[];
};

/** Set by global-setup.ts for the whole run: the directory of the run's Worker bundles (workerBundle). */
export const WORKER_BUNDLES_ENV = 'HONEST_HEALTH_TEST_WORKER_BUNDLES';

const wrangler = join(repoRoot, 'node_modules/.bin/wrangler');

/**
 * Bundles into `outdir` as `wrangler deploy --dry-run` does; `args` name another entry or config
 * (wrangler.toml and its main otherwise). Offline, with wrangler's own files kept under `outdir`.
 */
export function buildWorker(outdir: string, args: readonly string[] = []): void {
  execFileSync(wrangler, ['deploy', '--dry-run', '--outdir', outdir, ...args], {
    cwd: repoRoot,
    env: { ...process.env, XDG_CONFIG_HOME: join(outdir, 'config'), WRANGLER_SEND_METRICS: 'false' },
    stdio: 'pipe',
  });
}

/**
 * The directory of what `wrangler deploy --dry-run [args]` writes, its metafile as `bundle-meta.json`
 * beside the bundle. Built once per run and shared by every file that asks for the same `args`: the
 * sources do not change during a run, and the files only read it. Two workers asking at once: one
 * builds, the other waits for its directory.
 */
export async function workerBundle(args: readonly string[] = []): Promise<string> {
  const root = process.env[WORKER_BUNDLES_ENV];
  if (!root) throw new Error(`${WORKER_BUNDLES_ENV} is unset: the integration global setup sets it`);
  const dir = join(root, createHash('sha256').update(JSON.stringify(args)).digest('hex').slice(0, 16));
  await buildOnce(dir, (into) => buildWorker(into, [...args, '--metafile', join(into, 'bundle-meta.json')]));
  return dir;
}

/**
 * Miniflare's options for a bundle's one module, `file` in `dir`: what `modules: true` with `scriptPath`
 * gives workerd, without Miniflare parsing the whole bundle again at every start to look for imports
 * of other modules (a wrangler bundle imports only built-ins; one that imported more would fail to
 * start). Miniflare's README, `modules`: `true` locates transitive dependencies; an array defines the
 * modules by hand, the entrypoint first.
 */
export function bundleModule(dir: string, file: string) {
  return { modulesRoot: dir, modules: [{ type: 'ESModule' as const, path: join(dir, file) }] };
}

/** Runs a Worker's scheduled() handler as the every-minute cron trigger would. */
export async function runScheduled(mf: Miniflare): Promise<void> {
  // Miniflare's Fetcher type comes from its own bundled workers-types; only this method is needed.
  const fetcher = (await mf.getWorker()) as unknown as { scheduled(o: { cron: string }): Promise<unknown> };
  await fetcher.scheduled({ cron: '* * * * *' });
}
