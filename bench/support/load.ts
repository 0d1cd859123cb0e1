// One autocannon run, reduced to the figures the benchmark reports.
import autocannon from 'autocannon';
import { cpuSeconds, machineBusySeconds } from './cpu.js';

export interface LoadOptions {
  connections: number;
  /** Seconds. */
  duration: number;
  /** The server's process id: its CPU time is sampled around the run. */
  serverPid?: number | undefined;
}

export interface LoadResult {
  /** Completed requests divided by the run's duration. */
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Completed requests. */
  total: number;
  non2xx: number;
  /** Socket errors, timeouts included. */
  errors: number;
  /** Seconds the run lasted, as autocannon measured it. */
  durationS: number;
  /** Server CPU time (user + system) per completed request, in microseconds; undefined without /proc. */
  cpuUsPerRequest: number | undefined;
  /**
   * Cores kept busy during the run by everything except the server and this process (the load
   * generator): Postgres for /readyz, otherwise neighbours whose noise the run absorbed.
   */
  otherCores: number | undefined;
}

export async function runLoad(url: string, options: LoadOptions): Promise<LoadResult> {
  const { connections, duration, serverPid } = options;
  const cpuBefore = cpuSeconds(serverPid);
  const selfBefore = process.cpuUsage();
  const busyBefore = machineBusySeconds();
  const result = await autocannon({ url, connections, duration, pipelining: 1, timeout: 10 });
  const cpuAfter = cpuSeconds(serverPid);
  const self = process.cpuUsage(selfBefore);
  const busyAfter = machineBusySeconds();
  const serverCpu = cpuBefore !== undefined && cpuAfter !== undefined ? cpuAfter - cpuBefore : undefined;
  const total = result.requests.total;
  return {
    rps: result.duration > 0 ? total / result.duration : 0,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    total,
    non2xx: result.non2xx,
    errors: result.errors,
    durationS: result.duration,
    cpuUsPerRequest: serverCpu !== undefined && total > 0 ? (serverCpu * 1e6) / total : undefined,
    otherCores:
      serverCpu !== undefined && busyBefore !== undefined && busyAfter !== undefined && result.duration > 0
        ? Math.max(0, busyAfter - busyBefore - serverCpu - (self.user + self.system) / 1e6) / result.duration
        : undefined,
  };
}
