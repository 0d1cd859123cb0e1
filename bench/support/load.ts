// One autocannon run, reduced to the figures the benchmark reports, and those figures summarised over rounds.
import autocannon from 'autocannon';
import { cpuSeconds, machineBusySeconds } from './cpu.js';
import { median, round1, round2, round3 } from './stats.js';

export interface LoadOptions {
  connections: number;
  /** Seconds. */
  duration: number;
  /** The server's process id: its CPU time is sampled around the run. */
  serverPid?: number | undefined;
  /** Sent with every request (an API key for an authenticated route). */
  headers?: Record<string, string>;
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
  const { connections, duration, serverPid, headers } = options;
  const cpuBefore = cpuSeconds(serverPid);
  const selfBefore = process.cpuUsage();
  const busyBefore = machineBusySeconds();
  const result = await autocannon({
    url,
    connections,
    duration,
    pipelining: 1,
    timeout: 10,
    ...(headers ? { headers } : {}),
  });
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

/** A load target's figures over its rounds: medians, totals and the per-round values. */
export interface LoadSummary {
  rps: number;
  p99_ms: number;
  p50_ms: number;
  non2xx: number;
  errors: number;
  /** Server process CPU per request (µs), median of rounds; null where /proc is unavailable. */
  cpu_us_per_req: number | null;
  /** Cores busy with anything but the server and the load generator, per round (null without /proc). */
  rounds_other_cores: (number | null)[];
  rounds_rps: number[];
  rounds_p99_ms: number[];
}

export function summariseLoad(runs: readonly LoadResult[]): LoadSummary {
  return {
    rps: Math.round(median(runs.map((r) => r.rps))),
    p99_ms: round1(median(runs.map((r) => r.p99Ms))),
    p50_ms: round1(median(runs.map((r) => r.p50Ms))),
    non2xx: runs.reduce((n, r) => n + r.non2xx, 0),
    errors: runs.reduce((n, r) => n + r.errors, 0),
    cpu_us_per_req: runs.every((r) => r.cpuUsPerRequest !== undefined)
      ? round1(median(runs.map((r) => r.cpuUsPerRequest as number)))
      : null,
    rounds_other_cores: runs.map((r) => (r.otherCores === undefined ? null : round2(r.otherCores))),
    rounds_rps: runs.map((r) => Math.round(r.rps)),
    rounds_p99_ms: runs.map((r) => round1(r.p99Ms)),
  };
}

/** One run as a progress line: rate, tail latency, server CPU per request and the noise around it. */
export function describeRun(r: LoadResult): string {
  return (
    `${Math.round(r.rps).toString().padStart(6)} req/s  p99 ${round1(r.p99Ms)} ms` +
    `  cpu ${r.cpuUsPerRequest === undefined ? '?' : Math.round(r.cpuUsPerRequest)} µs/req` +
    `  others ${r.otherCores === undefined ? '?' : r.otherCores.toFixed(2)} cores` +
    `  non-2xx ${r.non2xx}  errors ${r.errors}`
  );
}

/** The median over rounds of a/b, each pair measured in the same round (so under the same conditions). */
export function pairedRatio(
  a: readonly LoadResult[],
  b: readonly LoadResult[],
  pick: (r: LoadResult) => number | undefined = (r) => r.rps,
): number | null {
  const ratios = a.map((r, i) => {
    const x = pick(r);
    const y = b[i] === undefined ? undefined : pick(b[i]);
    return x === undefined || y === undefined || y === 0 ? Number.NaN : x / y;
  });
  return ratios.some(Number.isNaN) || ratios.length === 0 ? null : round3(median(ratios));
}
