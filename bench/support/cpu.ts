// CPU time a process (or the machine) has used so far (user + system, all threads), read from /proc on Linux. Per-request
// CPU cost is far less sensitive to noisy neighbours than requests per second.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

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
