// The whole run's temp files in one dir of its own: this global setup points TMPDIR (so os.tmpdir() in
// every test worker and every process a test starts) at a fresh dir, and at the end of the run lists
// what is still in it. Anything there is a leak: a test that made a file or dir and did not remove it,
// or a process it started that did. The dir is the run's own, so tests running in parallel, and other
// runs on the same machine, neither hide a leak nor are taken for one.
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Caches that tools keep in the temp dir on purpose, shared with the machine's (symlinks): tsx's
 * transforms, Node's compile cache, and wrangler's last look at its latest version on npm.
 */
const SHARED_CACHES = [`tsx-${process.geteuid?.() ?? 0}`, 'node-compile-cache', 'update-check'];

export default function setup(): () => void {
  const outer = tmpdir();
  const previous = process.env.TMPDIR;
  const root = mkdtempSync(join(outer, 'honest-health-run-'));
  // As /tmp is: the test clusters' postgres user makes its own dirs here.
  chmodSync(root, 0o1777);
  for (const name of SHARED_CACHES) {
    mkdirSync(join(outer, name), { recursive: true });
    symlinkSync(join(outer, name), join(root, name));
  }
  process.env.TMPDIR = root;
  return () => {
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    const left = readdirSync(root).filter((name) => !SHARED_CACHES.includes(name));
    rmSync(root, { recursive: true, force: true });
    console.log(
      `temp files: ${left.length} left behind by the run${left.length ? `: ${left.join(', ')}` : ''}`,
    );
    if (left.length > 0) {
      // Vitest reports an error thrown here but still exits 0: set the exit code as well.
      process.exitCode = 1;
      throw new Error(`the run left these in its temp dir (os.tmpdir()): ${left.join(', ')}`);
    }
  };
}
