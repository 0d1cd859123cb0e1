// One autocannon run of POSTs, each with an Idempotency-Key never used before. A run is sized by a
// request count, not a duration: every request sent is answered before the run ends, so the rows the
// server wrote can be checked against the 2xx answers exactly (a timed run cuts requests off in flight,
// and the server may still commit them).
import autocannon from 'autocannon';
import { type ClusterCpu, clusterCpu, clusterCpuDelta, cpuSeconds, machineBusySeconds } from './cpu.js';

// The parts of autocannon 8's API this run uses beyond bench/support/autocannon.d.ts.
declare module 'autocannon' {
  interface RequestParams {
    method: string;
    path: string;
    headers: Record<string, string>;
    body?: string | Buffer;
  }
  interface RequestSpec {
    /** Called for every request a client sends (its first included); returns what to send. */
    setupRequest?: (request: RequestParams, context: Record<string, unknown>) => RequestParams;
  }
  interface ClientHandle {
    on(event: 'done', listener: () => void): unknown;
  }
  interface Options {
    body?: string | Buffer;
    /** Total requests, spread evenly over the connections; each connection stops after its share. */
    amount?: number;
    requests?: RequestSpec[];
    setupClient?: (client: ClientHandle) => void;
  }
}

export interface IngressLoadOptions {
  url: string;
  connections: number;
  /** Requests in the run (at least `connections`). */
  amount: number;
  body: string;
  headers: Record<string, string>;
  /** Idempotency keys are `${keyPrefix}-${n}`; the prefix must be new for every run. */
  keyPrefix: string;
  /** The server's process id: its CPU time (all threads) is sampled around the run. */
  serverPid: number | undefined;
  /** PGDATA of the cluster both servers use: its processes' CPU time is sampled too. */
  clusterDataDir: string;
}

export interface IngressLoadResult {
  /** Answered requests divided by the time from start to the last answer. */
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Answered requests. */
  total: number;
  /** Idempotency keys handed out: one per request sent. */
  keys: number;
  /** Answers by HTTP status. */
  statuses: Record<string, number>;
  ok2xx: number;
  non2xx: number;
  /** Socket errors, timeouts included. */
  errors: number;
  durationS: number;
  /** Server CPU (user + system, all threads) per answered request, µs; undefined without /proc. */
  cpuUsPerRequest: number | undefined;
  /** PostgreSQL CPU (all the cluster's processes) per answered request, µs. */
  postgresUsPerRequest: number | undefined;
  /** Cores busy with anything but the server, PostgreSQL and this process: neighbours' noise. */
  otherCores: number | undefined;
}

interface Sample {
  at: number;
  server: number | undefined;
  postgres: ClusterCpu | undefined;
  machine: number | undefined;
  self: NodeJS.CpuUsage;
}

export async function runIngressLoad(options: IngressLoadOptions): Promise<IngressLoadResult> {
  const { connections, amount, serverPid, clusterDataDir, keyPrefix } = options;
  if (amount < connections)
    throw new Error(`amount (${amount}) must be at least connections (${connections})`);
  const sample = (): Sample => ({
    at: performance.now(),
    server: cpuSeconds(serverPid),
    postgres: clusterCpu(clusterDataDir),
    machine: machineBusySeconds(),
    self: process.cpuUsage(),
  });
  let keys = 0;
  let done = 0;
  let end: Sample | undefined;
  const start = sample();
  const result = await autocannon({
    url: options.url,
    method: 'POST',
    headers: options.headers,
    body: options.body,
    connections,
    amount,
    pipelining: 1,
    timeout: 10,
    requests: [
      {
        setupRequest(request) {
          keys += 1;
          request.headers['idempotency-key'] = `${keyPrefix}-${keys}`;
          return request;
        },
      },
    ],
    setupClient(client) {
      // A connection is done right after its last answer; autocannon itself reports only at its next
      // one-second tick, which would pad the duration.
      client.on('done', () => {
        done += 1;
        if (done === connections) end = sample();
      });
    },
  });
  const last = end ?? sample();
  const durationS = end ? (last.at - start.at) / 1000 : result.duration;
  const total = result.requests.total;
  const delta = (a: number | undefined, b: number | undefined) =>
    a !== undefined && b !== undefined ? b - a : undefined;
  const server = delta(start.server, last.server);
  const postgres =
    start.postgres && last.postgres ? clusterCpuDelta(start.postgres, last.postgres) : undefined;
  const machine = delta(start.machine, last.machine);
  const self = (last.self.user - start.self.user + last.self.system - start.self.system) / 1e6;
  const perRequest = (seconds: number | undefined) =>
    seconds !== undefined && total > 0 ? (seconds * 1e6) / total : undefined;
  return {
    rps: durationS > 0 ? total / durationS : 0,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    total,
    keys,
    statuses: Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, s]) => [code, s.count])),
    ok2xx: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    durationS,
    cpuUsPerRequest: perRequest(server),
    postgresUsPerRequest: perRequest(postgres),
    otherCores:
      server !== undefined && postgres !== undefined && machine !== undefined && durationS > 0
        ? Math.max(0, machine - server - postgres - self) / durationS
        : undefined,
  };
}
