// A directory built once and shared: by the test workers of one run, or by every run of a checkout.
import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

// A builder that died leaves a lock nobody refreshes; past this age another takes over.
const STALE_LOCK_MS = 180_000;
const POLL_MS = 100;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Makes `dir` by `build`, unless it exists: one builder at a time (a lock directory beside it), the
 * others wait for it. `build` fills a directory of its own, renamed to `dir` once done, so a reader
 * never sees a half-built one.
 */
export async function buildOnce(dir: string, build: (into: string) => unknown): Promise<void> {
  const lock = `${dir}.lock`;
  mkdirSync(dirname(dir), { recursive: true });
  for (;;) {
    if (existsSync(dir)) return;
    try {
      mkdirSync(lock);
    } catch {
      const age = Date.now() - (existsSync(lock) ? statSync(lock).mtimeMs : Date.now());
      if (age > STALE_LOCK_MS) rmSync(lock, { recursive: true, force: true });
      await sleep(POLL_MS);
      continue;
    }
    try {
      if (existsSync(dir)) return;
      const building = `${dir}.building-${process.pid}`;
      rmSync(building, { recursive: true, force: true });
      await build(building);
      renameSync(building, dir);
      return;
    } finally {
      rmSync(lock, { recursive: true, force: true });
    }
  }
}
