// CPU time of a PostgreSQL cluster (postmaster and every backend, those that have exited included),
// read from /proc on Linux, so the queue benchmark can tell Postgres from its neighbours.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

interface ProcTimes {
  ppid: number;
  /** utime + stime + cutime + cstime, in clock ticks: own time plus that of reaped children. */
  ticks: number;
}

function procTimes(pid: number): ProcTimes | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // After the parenthesised command: state (3), ppid (4), ... utime (14), stime (15), cutime (16), cstime (17).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
    return Number.isFinite(ticks) ? { ppid: Number(fields[1]), ticks } : undefined;
  } catch {
    return undefined;
  }
}

/** Seconds of CPU used by the cluster whose PGDATA is `dataDir`, or undefined without /proc. */
export function clusterCpuSeconds(dataDir: string): number | undefined {
  let postmaster: number;
  try {
    postmaster = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n', 1)[0]);
  } catch {
    return undefined;
  }
  const root = procTimes(postmaster);
  if (root === undefined) return undefined;
  let ticks = root.ticks;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const child = procTimes(Number(entry));
    if (child?.ppid === postmaster) ticks += child.ticks;
  }
  return ticks / clockTicks();
}
