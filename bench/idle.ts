// Idle benchmark: the CPU our Node server burns with no traffic at all, against a bare Hono hello-world
// on @hono/node-server, side by side in the same window: ours on a real PostgreSQL cluster, the same
// once /metrics has been scraped (which starts prom-client's event-loop lag monitor, a 10 ms timer:
// packages/platform/src/metrics/default-metrics.ts), ours on the embedded PGlite default, and the baseline, all
// started, left to settle, then sampled from /proc over the same BENCH_IDLE_S seconds: each thread's
// schedstat run time, in nanoseconds (utime + stime count 10 ms ticks, too coarse for a few ms a second). The cluster's own CPU over that
// window is reported too (what our periodic queries cost the database). It reports figures and never
// fails on them (tests assert, benchmarks report). Run: `npm run bench:idle`. Knobs: BENCH_IDLE_S
// (the sampled window, default 20), BENCH_SETTLE_S (after ready, before sampling, default 20).
//
// The defaults are measured, as an operator runs it: API_KEY_REFRESH_MS=5000, Xero off (so no ticks),
// metrics on. bench:ingress's "idle ms CPU/s" is not this figure: it samples one second right after its
// smoke test, with API_KEY_REFRESH_MS=100 (ten registry queries a second, by its own choice).
import { availableParallelism, loadavg } from 'node:os';
import { freshDatabase } from '../test/support/databases.js';
import { startCluster } from '../test/support/postgres.js';
import type { ServerProcess } from '../test/support/server.js';
import { spawnBareHono } from './support/bare.js';
import { bootToReady, stopServer, trackServer } from './support/boot.js';
import { clusterCpu, clusterCpuDelta, scheduledCpuSeconds } from './support/cpu.js';
import { removeTempDir, runBench, tempDir, track, untrack } from './support/lifecycle.js';
import { intEnv, printResults, progress, table } from './support/report.js';
import { round2, round3 } from './support/stats.js';

const IDLE_S = intEnv('BENCH_IDLE_S', 20);
// A first start leaves V8 collecting for a while (PGlite's heap most): 20 s lets that pass.
const SETTLE_S = intEnv('BENCH_SETTLE_S', 20);
// Slices of the window, to show whether the cost is steady or comes in bursts (a periodic query).
const SLICES = 4;

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

type Name = 'ours_pg' | 'ours_pg_scraped' | 'ours_pglite' | 'bare';
const LABEL: Record<Name, string> = {
  ours_pg: 'ours, PostgreSQL',
  ours_pg_scraped: 'ours, PostgreSQL, /metrics scraped once',
  ours_pglite: 'ours, PGlite (embedded default)',
  bare: 'bare Hono (@hono/node-server)',
};

/** ms of CPU per second of wall time between two samples, or null without /proc. */
const rate = (before: number | undefined, after: number | undefined, wallMs: number): number | null =>
  before === undefined || after === undefined ? null : round2(((after - before) * 1000) / (wallMs / 1000));

async function startOurs(env: Record<string, string>, cwd?: string): Promise<ServerProcess> {
  // LOG_LEVEL=warn: a log line per api-key registry refresh would be work an operator need not pay for either.
  const { server } = await bootToReady({ env: { LOG_LEVEL: 'warn', ...env }, ...(cwd ? { cwd } : {}) }, 100);
  return server;
}

async function main(): Promise<void> {
  const wallStart = performance.now();
  const loadBefore = loadavg()[0] ?? 0;
  progress(`idle bench: settle ${SETTLE_S} s, sample ${IDLE_S} s, ${availableParallelism()} cores`);
  progress('starting a throwaway PostgreSQL cluster');
  const cluster = await startCluster();
  track('cluster', () => cluster.remove());
  const dbUrl = await freshDatabase(cluster, 'idle');

  progress('booting ours on PostgreSQL (it migrates), ours on PGlite, and the bare baseline');
  const oursPg = await startOurs({ DATABASE_URL: dbUrl });
  const oursScraped = await startOurs({ DATABASE_URL: await freshDatabase(cluster, 'idle_scraped') });
  const scrape = await oursScraped.get('/metrics');
  await scrape.text();
  if (scrape.status !== 200) throw new Error(`GET /metrics: ${scrape.status}`);
  const pgliteDir = tempDir('bench-idle-pglite-');
  const oursPglite = await startOurs({}, pgliteDir);
  const bare = await spawnBareHono();
  trackServer(bare);
  const pids: Record<Name, number | undefined> = {
    ours_pg: oursPg.child.pid,
    ours_pg_scraped: oursScraped.child.pid,
    ours_pglite: oursPglite.child.pid,
    bare: bare.child.pid,
  };
  const names = Object.keys(pids) as Name[];

  progress(`settling ${SETTLE_S} s`);
  await sleep(SETTLE_S * 1000);
  progress(`sampling ${IDLE_S} s with no traffic`);
  const sample = () => ({
    at: performance.now(),
    cpu: Object.fromEntries(names.map((n) => [n, scheduledCpuSeconds(pids[n])])) as Record<
      Name,
      number | undefined
    >,
    cluster: clusterCpu(cluster.dataDir),
  });
  const samples = [sample()];
  for (let i = 1; i <= SLICES; i++) {
    await sleep((IDLE_S * 1000) / SLICES);
    samples.push(sample());
  }
  const first = samples[0] as ReturnType<typeof sample>;
  const last = samples[samples.length - 1] as ReturnType<typeof sample>;
  const wallMs = last.at - first.at;
  const idle = Object.fromEntries(names.map((n) => [n, rate(first.cpu[n], last.cpu[n], wallMs)])) as Record<
    Name,
    number | null
  >;
  const slices = Object.fromEntries(
    names.map((n) => [
      n,
      samples.slice(1).map((s, i) => {
        const prev = samples[i] as ReturnType<typeof sample>;
        return rate(prev.cpu[n], s.cpu[n], s.at - prev.at);
      }),
    ]),
  ) as Record<Name, (number | null)[]>;
  const postgres =
    first.cluster && last.cluster
      ? round2((clusterCpuDelta(first.cluster, last.cluster) * 1000) / (wallMs / 1000))
      : null;

  await stopServer(bare);
  await stopServer(oursPglite);
  await stopServer(oursScraped);
  await stopServer(oursPg);
  removeTempDir(pgliteDir);
  await untrack('cluster');

  const vsBare = (n: Name) => {
    const ours = idle[n];
    const base = idle.bare;
    // Near zero a ratio says little, so the difference is reported as well.
    return ours === null || base === null ? null : base > 0 ? round3(ours / base) : null;
  };
  const overBare = (n: Name) => {
    const ours = idle[n];
    return ours === null || idle.bare === null ? null : round2(ours - idle.bare);
  };
  const fmt = (v: number | null) => (v === null ? '—' : v.toFixed(2));
  console.log('');
  console.log(
    `Idle CPU — no traffic, ${round2(wallMs / 1000)} s sampled after ${SETTLE_S} s settling; 1-min load ` +
      `average ${loadBefore.toFixed(1)} at start (${availableParallelism()} cores)`,
  );
  console.log(
    table([
      ['server', 'ms CPU/s', 'over bare', `per ${IDLE_S / SLICES} s slice`],
      ...names.map((n) => [
        LABEL[n],
        fmt(idle[n]),
        n === 'bare' ? '' : fmt(overBare(n)),
        slices[n].map(fmt).join(' '),
      ]),
      ['PostgreSQL cluster (serving both of ours on it)', fmt(postgres), '', ''],
    ]),
  );
  printResults(
    'idle',
    {
      idle_s: IDLE_S,
      settle_s: SETTLE_S,
      loadavg_1m_start: round2(loadBefore),
      idle_cpu_ms_per_s: idle,
      slices_ms_per_s: slices,
      postgres_cpu_ms_per_s: postgres,
      wall_s: round2((performance.now() - wallStart) / 1000),
    },
    {
      idle_cpu_ms_per_s: idle.ours_pg,
      pglite_idle_cpu_ms_per_s: idle.ours_pglite,
      bare_idle_cpu_ms_per_s: idle.bare,
      idle_cpu_vs_bare: vsBare('ours_pg'),
      idle_cpu_over_bare_ms_per_s: overBare('ours_pg'),
      scraped_idle_cpu_ms_per_s: idle.ours_pg_scraped,
      pglite_idle_cpu_over_bare_ms_per_s: overBare('ours_pglite'),
      postgres_idle_cpu_ms_per_s: postgres,
    },
  );
}

await runBench(main);
