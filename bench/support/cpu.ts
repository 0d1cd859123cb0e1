// CPU time used so far (user + system, all threads) by a process, a PostgreSQL cluster or the whole machine,
// read from /proc on Linux. Per-request CPU cost is far less sensitive to noisy neighbours than requests per second.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

let ticksPerSecond: number | undefined;

export function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** Seconds of CPU used by `pid`, or undefined where /proc is not available. */
export function cpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name (which may hold spaces): state is field 3, so
    // utime (14) and stime (15) sit at offsets 11 and 12.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks / clockTicks() : undefined;
  } catch {
    return undefined;
  }
}

/** CPU seconds the whole machine has spent busy (all cores, steal excluded), or undefined without /proc. */
export function machineBusySeconds(): number | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '';
    // cpu  user nice system idle iowait irq softirq steal guest guest_nice (guest time is inside user)
    const [user, nice, system, , , irq, softirq] = line.trim().split(/\s+/).slice(1).map(Number);
    const busy = [user, nice, system, irq, softirq].reduce<number>((sum, n) => sum + (n ?? Number.NaN), 0);
    return Number.isFinite(busy) ? busy / clockTicks() : undefined;
  } catch {
    return undefined;
  }
}

/** CPU seconds (user + system) used so far by each process of a cluster, by process id. */
export type ClusterCpu = Map<number, number>;

/**
 * Samples the CPU time of a cluster's postmaster and its children (backends, WAL writer,
 * checkpointer…), or undefined without /proc.
 */
export function clusterCpu(dataDir: string): ClusterCpu | undefined {
  try {
    const postmaster = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n', 1)[0]);
    if (!Number.isSafeInteger(postmaster)) return undefined;
    const cpu: ClusterCpu = new Map();
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      let stat: string;
      try {
        stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      } catch {
        continue; // exited while we looked
      }
      // After the parenthesised command name: state (3), ppid (4), …, utime (14), stime (15).
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const pid = Number(entry);
      if (pid !== postmaster && Number(fields[1]) !== postmaster) continue;
      cpu.set(pid, (Number(fields[11]) + Number(fields[12])) / clockTicks());
    }
    return cpu;
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds the cluster used between two samples, over the processes alive at the second one (a
 * process started in between counts from zero). A backend that exited in between (a short-lived
 * client's) is left out: its time is gone from /proc, and counting its earlier time would subtract it.
 */
export function clusterCpuDelta(before: ClusterCpu, after: ClusterCpu): number {
  let seconds = 0;
  for (const [pid, now] of after) seconds += now - (before.get(pid) ?? 0);
  return seconds;
}

/**
 * Seconds `pid` has run on a CPU, summed over its live threads, from /proc/<pid>/task/<tid>/schedstat
 * (nanoseconds, where utime + stime count whole clock ticks of 10 ms): precise enough for an idle
 * process, whose CPU is a few ms a second. Time of threads that exited is not in it. Undefined
 * without /proc or schedstat.
 */
export function scheduledCpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ', 1)[0]);
      } catch {
        // the thread exited while we looked
      }
    }
    return Number.isFinite(ns) ? ns / 1e9 : undefined;
  } catch {
    return undefined;
  }
}
