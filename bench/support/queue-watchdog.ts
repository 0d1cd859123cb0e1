// A detached watchdog for the queue benchmark. Ctrl-C under `npx tsx` reaches tsx too, and tsx
// SIGKILLs its child when the child does not acknowledge the signal within a few tens of milliseconds
// (easily missed on a loaded machine): then no exit hook runs, and the cluster (which pg_ctl detached)
// and the worker processes would outlive the run. The watchdog runs in its own session, holds an IPC
// channel to the benchmark, and when that channel closes without a `forget` it kills the registered
// processes, stops the registered clusters and removes their directories.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findPgBinDir } from '../../test/support/postgres.js';

type WatchMessage =
  | { type: 'pid'; pid: number }
  | { type: 'cluster'; dir: string; stop: string[] }
  | { type: 'forget' };

export interface Watchdog {
  pid(pid: number | undefined): void;
  cluster(dataDir: string, dir: string): void;
  /** The run cleaned up after itself: the watchdog exits without touching anything. */
  forget(): void;
}

export function startWatchdog(): Watchdog {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url)], {
    detached: true,
    stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
    env: { PATH: process.env.PATH, QUEUE_WATCHDOG: '1' },
  });
  // Neither the process nor its channel may keep the benchmark alive.
  child.unref();
  (child.channel as { unref?: () => void } | undefined)?.unref?.();
  const send = (message: WatchMessage) => {
    if (child.connected) child.send(message);
  };
  return {
    pid: (pid) => {
      if (pid !== undefined) send({ type: 'pid', pid });
    },
    cluster: (dataDir, dir) => {
      const pgCtl = join(findPgBinDir(), 'pg_ctl');
      const args = ['-D', dataDir, '-m', 'immediate', '-w', '-t', '10', 'stop'];
      const stop =
        process.getuid?.() === 0 ? ['runuser', '-u', 'postgres', '--', pgCtl, ...args] : [pgCtl, ...args];
      send({ type: 'cluster', dir, stop });
    },
    forget: () => {
      send({ type: 'forget' });
      if (child.connected) child.disconnect();
    },
  };
}

function watch(): void {
  const pids: number[] = [];
  const clusters: Array<{ dir: string; stop: string[] }> = [];
  let forgotten = false;
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => {});
  process.on('message', (raw) => {
    const message = raw as WatchMessage;
    if (message.type === 'pid') pids.push(message.pid);
    else if (message.type === 'cluster') clusters.push({ dir: message.dir, stop: message.stop });
    else forgotten = true;
  });
  process.on('disconnect', () => {
    if (!forgotten) {
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
      }
      for (const { dir, stop } of clusters) {
        try {
          const [file, ...args] = stop as [string, ...string[]];
          execFileSync(file, args, { cwd: '/', stdio: 'ignore' });
        } catch {
          // Already stopped.
        }
        rmSync(dir, { recursive: true, force: true });
      }
    }
    process.exit(0);
  });
}

if (process.env.QUEUE_WATCHDOG === '1' && process.send) watch();
