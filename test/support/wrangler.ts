// Worker bundles as wrangler builds them, for the tests that run them in workerd through Miniflare.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Miniflare } from 'miniflare';
import { parse } from 'smol-toml';
import { repoRoot } from './server.js';

/** wrangler.toml's runtime settings, which Miniflare is given as the deployed Worker gets them. */
export const wranglerSettings = parse(readFileSync(join(repoRoot, 'wrangler.toml'), 'utf8')) as {
  compatibility_date: string;
  compatibility_flags: string[];
};

/**
 * Bundles into `outdir` as `wrangler deploy --dry-run` does; `args` name another entry or config
 * (wrangler.toml and its main otherwise). Offline, with wrangler's own files kept under `outdir`.
 */
export function buildWorker(outdir: string, args: readonly string[] = []): void {
  execFileSync('npx', ['wrangler', 'deploy', '--dry-run', '--outdir', outdir, ...args], {
    cwd: repoRoot,
    env: { ...process.env, XDG_CONFIG_HOME: join(outdir, 'config'), WRANGLER_SEND_METRICS: 'false' },
    stdio: 'pipe',
  });
}

/** Runs a Worker's scheduled() handler as the every-minute cron trigger would. */
export async function runScheduled(mf: Miniflare): Promise<void> {
  // Miniflare's Fetcher type comes from its own bundled workers-types; only this method is needed.
  const fetcher = (await mf.getWorker()) as unknown as { scheduled(o: { cron: string }): Promise<unknown> };
  await fetcher.scheduled({ cron: '* * * * *' });
}
