// Runtimes benchmark: one app on its three runtimes, in one run on one machine.
//   (i)   Worker cold start: a fresh Miniflare instance (a new workerd) and its first dispatchFetch,
//         /readyz, which boots the isolate (config, schema check, registry, probe) against a real
//         PostgreSQL through the local Neon proxy; against the same request on the warm instance.
//   (ii)  /livez requests per second and server CPU per request, Bun (the real bun binary running
//         src/runtime/bun.ts) against Node (dist/node.js), alternated rounds, each on its own database.
//   (iii) The Worker bundle's size, raw and gzip, as `npm run build:worker` builds it.
// It reports figures and marks missed targets; it never fails on them (tests assert, benchmarks
// report). Run: `npm run bench:runtimes`. Knobs: BENCH_COLD_SAMPLES, BENCH_WARM_REQUESTS,
// BENCH_CONNECTIONS, BENCH_DURATION_S, BENCH_WARMUP_S, BENCH_ROUNDS.
import { availableParallelism, loadavg } from 'node:os';
import { resolve } from 'node:path';
import type { Miniflare } from 'miniflare';
import { startNeonProxy } from '../dev/neon-proxy/server.js';
import { freshDatabase } from '../test/support/databases.js';
import { startCluster } from '../test/support/postgres.js';
import { repoRoot, type ServerProcess, TEST_TOKEN_KEY } from '../test/support/server.js';
import { captureLog, openDatabase } from '../test/support/ticks.js';
import { bootToReady, stopServer } from './support/boot.js';
import { runBench, tempDir, track, untrack } from './support/lifecycle.js';
import { describeRun, type LoadResult, pairedRatio, runLoad, summariseLoad } from './support/load.js';
import { intEnv, missedChecks, printResults, progress, table, verdict } from './support/report.js';
import { median, percentile, round1, round2, round3 } from './support/stats.js';
import { buildWorkerBundle, neonUrl, startMiniflare, type WorkerBundle } from './support/worker-bundle.js';

const COLD_SAMPLES = intEnv('BENCH_COLD_SAMPLES', 7);
const WARM_REQUESTS = intEnv('BENCH_WARM_REQUESTS', 20);
// Two cores shared by autocannon, the server under test and everything else: the HTTP bench's
// settings, so that the Node figure here can be read next to bench:http's.
const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 50);
const DURATION_S = intEnv('BENCH_DURATION_S', 4);
const WARMUP_S = intEnv('BENCH_WARMUP_S', 1);
const ROUNDS = intEnv('BENCH_ROUNDS', 4);
const TARGET = { bundleGzipKiB: 150 } as const;
// A /livez run during which other processes kept more than this many cores busy was disturbed.
const NOISY_CORES = 0.5;

const BUN = resolve(repoRoot, 'node_modules/.bin/bun');
const BUN_ENTRY = resolve(repoRoot, 'src/runtime/bun.ts');
const kib = (bytes: number) => round1(bytes / 1024);

interface Timing {
  ms: number;
  status: number;
}

async function timedFetch(mf: Miniflare, path: string): Promise<Timing> {
  const started = performance.now();
  const res = await mf.dispatchFetch(`http://worker${path}`);
  const body = await res.text();
  const ms = performance.now() - started;
  if (res.status !== 200) throw new Error(`Worker ${path}: ${res.status} ${body.slice(0, 300)}`);
  return { ms, status: res.status };
}

interface WorkerSamples {
  /** new Miniflare → ready (workerd started, the bundle loaded). */
  startupMs: number[];
  /** The first /readyz of the fresh instance: the isolate's boot and the probe. */
  firstReadyzMs: number[];
  /** new Miniflare → first /readyz answered. */
  coldTotalMs: number[];
  warmReadyzMs: number[];
  warmLivezMs: number[];
}

async function workerPhase(bundle: WorkerBundle, bindings: Record<string, string>): Promise<WorkerSamples> {
  const s: WorkerSamples = {
    startupMs: [],
    firstReadyzMs: [],
    coldTotalMs: [],
    warmReadyzMs: [],
    warmLivezMs: [],
  };
  for (let i = 1; i <= COLD_SAMPLES; i++) {
    const started = performance.now();
    const mf = startMiniflare(bundle, bindings);
    track(`miniflare ${i}`, () => mf.dispose());
    await mf.ready;
    const ready = performance.now();
    const first = await timedFetch(mf, '/readyz');
    s.startupMs.push(ready - started);
    s.firstReadyzMs.push(first.ms);
    s.coldTotalMs.push(performance.now() - started);
    const warmReadyz: number[] = [];
    for (let j = 0; j < WARM_REQUESTS; j++) {
      warmReadyz.push((await timedFetch(mf, '/readyz')).ms);
      s.warmLivezMs.push((await timedFetch(mf, '/livez')).ms);
    }
    s.warmReadyzMs.push(...warmReadyz);
    progress(
      `worker ${i}/${COLD_SAMPLES}: startup ${Math.round(ready - started)} ms, first /readyz ${Math.round(first.ms)} ms, ` +
        `warm /readyz median ${round1(median(warmReadyz))} ms`,
    );
    await untrack(`miniflare ${i}`);
  }
  return s;
}

type Runtime = 'node' | 'bun';

async function runtimesPhase(dbs: Record<Runtime, string>) {
  const env = (runtime: Runtime) => ({ DATABASE_URL: dbs[runtime], LOG_LEVEL: 'warn' });
  progress('starting Node (dist/node.js) and Bun (src/runtime/bun.ts), each migrating its fresh database');
  const node = await bootToReady({ env: env('node') });
  const bun = await bootToReady({ command: BUN, args: [BUN_ENTRY], env: env('bun') });
  const servers: Record<Runtime, ServerProcess> = { node: node.server, bun: bun.server };
  const measure = (runtime: Runtime, duration = DURATION_S) =>
    runLoad(`${servers[runtime].url}/livez`, {
      connections: CONNECTIONS,
      duration,
      serverPid: servers[runtime].child.pid,
    });
  for (const runtime of ['node', 'bun'] as const) {
    progress(`warm-up ${runtime} /livez (${WARMUP_S} s)`);
    await measure(runtime, WARMUP_S);
  }
  const runs: Record<Runtime, LoadResult[]> = { node: [], bun: [] };
  for (let round = 1; round <= ROUNDS; round++) {
    // ABBA: neither runtime always goes first.
    const order: Runtime[] = round % 2 === 1 ? ['node', 'bun'] : ['bun', 'node'];
    for (const runtime of order) {
      const r = await measure(runtime);
      runs[runtime].push(r);
      progress(`round ${round}/${ROUNDS} ${runtime.padEnd(4)} /livez ${describeRun(r)}`);
    }
  }
  await stopServer(servers.bun);
  await stopServer(servers.node);
  return { runs, bootMs: { node: node.ms, bun: bun.ms } };
}

const dist = (values: readonly number[]) => ({
  median: round1(median(values)),
  p90: round1(percentile(values, 90)),
  n: values.length,
});

async function main(): Promise<void> {
  const wallStart = performance.now();
  const loadBefore = loadavg()[0] ?? 0;
  progress(
    `runtimes bench: ${COLD_SAMPLES} cold Worker starts × ${WARM_REQUESTS} warm requests; /livez ` +
      `${CONNECTIONS} connections, ${DURATION_S} s × ${ROUNDS} rounds; ${availableParallelism()} cores`,
  );
  progress('bundling the Worker (wrangler deploy --dry-run)');
  const bundle = buildWorkerBundle(tempDir('bench-worker-'));

  progress('starting a throwaway PostgreSQL cluster and the local Neon proxy');
  const cluster = await startCluster();
  track('cluster', () => cluster.remove());
  const workerDb = await freshDatabase(cluster, 'bench_worker');
  // Workers never migrate (the deploy command does): migrate first, as `npm run db:migrate` would.
  await (await openDatabase(workerDb, captureLog().log)).close();
  const proxy = await startNeonProxy({ upstream: cluster.url() });
  track('neon proxy', () => proxy.close());

  const worker = await workerPhase(bundle, {
    DATABASE_URL: neonUrl(workerDb),
    NEON_LOCAL_PROXY: proxy.url,
    TOKEN_ENCRYPTION_KEY: TEST_TOKEN_KEY,
    LOG_LEVEL: 'warn',
  });
  await untrack('neon proxy');

  const { runs, bootMs } = await runtimesPhase({
    node: await freshDatabase(cluster, 'bench_node'),
    bun: await freshDatabase(cluster, 'bench_bun'),
  });
  await untrack('cluster');

  const loadAfter = loadavg()[0] ?? 0;
  const node = summariseLoad(runs.node);
  const bun = summariseLoad(runs.bun);
  const cold = {
    startup_ms: dist(worker.startupMs),
    first_readyz_ms: dist(worker.firstReadyzMs),
    total_ms: dist(worker.coldTotalMs),
  };
  const warm = { readyz_ms: dist(worker.warmReadyzMs), livez_ms: dist(worker.warmLivezMs) };
  const firstVsWarm = round1(cold.first_readyz_ms.median / warm.readyz_ms.median);
  const ratios = {
    bun_vs_node_rps: round3(bun.rps / node.rps),
    bun_vs_node_rps_paired: pairedRatio(runs.bun, runs.node),
    bun_vs_node_cpu_per_req:
      bun.cpu_us_per_req !== null && node.cpu_us_per_req !== null
        ? round3(bun.cpu_us_per_req / node.cpu_us_per_req)
        : null,
  };
  const gzipKiB = kib(bundle.gzipBytes);
  const failures = node.non2xx + node.errors + bun.non2xx + bun.errors;
  const checks = { bundle_gzip: gzipKiB <= TARGET.bundleGzipKiB, zero_failures: failures === 0 };
  const ms = (d: { median: number; p90: number }) => [d.median.toFixed(1), d.p90.toFixed(1)];
  const cpu = (v: number | null) => (v === null ? '—' : v.toFixed(1));

  console.log('');
  console.log(
    `Runtimes — ${availableParallelism()} cores, 1-min load average ${loadBefore.toFixed(1)} at start, ` +
      `${loadAfter.toFixed(1)} at end`,
  );
  console.log('');
  console.log(
    `Worker in workerd (Miniflare), ${COLD_SAMPLES} fresh instances, ${WARM_REQUESTS} warm requests each`,
  );
  console.log(
    table([
      ['figure', 'median ms', 'p90 ms'],
      ['cold: new Miniflare → ready (workerd up, bundle loaded)', ...ms(cold.startup_ms)],
      ['cold: first dispatchFetch /readyz (isolate boot + probe)', ...ms(cold.first_readyz_ms)],
      ['cold: new Miniflare → first /readyz answered', ...ms(cold.total_ms)],
      ['warm: /readyz (probe through the Neon proxy)', ...ms(warm.readyz_ms)],
      ['warm: /livez', ...ms(warm.livez_ms)],
      ['first /readyz ÷ warm /readyz (medians)', `${firstVsWarm}×`, ''],
    ]),
  );
  console.log('');
  console.log(
    `/livez, ${CONNECTIONS} connections, ${DURATION_S} s per run, median of ${ROUNDS} alternated rounds`,
  );
  console.log(
    table([
      [
        'runtime',
        'req/s',
        'p99 ms',
        'server µs CPU/req',
        'non-2xx',
        'errors',
        'req/s per round',
        'boot→ready ms',
      ],
      ...(
        [
          ['node', node, bootMs.node],
          ['bun', bun, bootMs.bun],
        ] as const
      ).map(([name, t, boot]) => [
        name,
        String(t.rps),
        t.p99_ms.toFixed(1),
        cpu(t.cpu_us_per_req),
        String(t.non2xx),
        String(t.errors),
        t.rounds_rps.join(' '),
        String(Math.round(boot)),
      ]),
    ]),
  );
  console.log('');
  console.log(
    table([
      ['check', 'value', 'target', 'result'],
      ['bun ÷ node /livez req/s (medians)', ratios.bun_vs_node_rps.toFixed(3), '—', 'report'],
      [
        'bun ÷ node /livez req/s (per-round pairs, median)',
        String(ratios.bun_vs_node_rps_paired ?? '—'),
        '—',
        'report',
      ],
      ['bun ÷ node server CPU per request', String(ratios.bun_vs_node_cpu_per_req ?? '—'), '—', 'report'],
      [
        'Worker bundle gzip (level 9)',
        `${gzipKiB} KiB`,
        `≤ ${TARGET.bundleGzipKiB} KiB`,
        verdict(checks.bundle_gzip),
      ],
      ['Worker bundle raw', `${kib(bundle.rawBytes)} KiB`, '—', 'report'],
      ['non-2xx + errors, all /livez runs', String(failures), '= 0', verdict(checks.zero_failures)],
    ]),
  );
  const livezRuns = [...runs.node, ...runs.bun];
  const noisyRuns = livezRuns.filter((r) => (r.otherCores ?? 0) > NOISY_CORES).length;
  if (noisyRuns > 0) {
    console.log('');
    console.log(
      `noise: ${noisyRuns} of ${livezRuns.length} /livez runs had more than ${NOISY_CORES} of a core busy with ` +
        'other processes; the CPU per request and the per-round pair ratio are steadier than req/s',
    );
  }
  printResults(
    'runtimes',
    {
      worker: {
        cold_samples: COLD_SAMPLES,
        warm_requests_per_sample: WARM_REQUESTS,
        cold,
        warm,
        first_readyz_vs_warm: firstVsWarm,
        bundle: { raw_kib: kib(bundle.rawBytes), gzip_kib: gzipKiB },
      },
      livez: {
        connections: CONNECTIONS,
        duration_s: DURATION_S,
        warmup_s: WARMUP_S,
        rounds: ROUNDS,
        node,
        bun,
      },
      boot_to_ready_ms: { node: Math.round(bootMs.node), bun: Math.round(bootMs.bun) },
      ratios,
      noisy_livez_runs: noisyRuns,
      loadavg_1m: { start: round2(loadBefore), end: round2(loadAfter) },
      targets: { bundle_gzip_kib: TARGET.bundleGzipKiB },
      missed: missedChecks(checks),
      wall_s: round2((performance.now() - wallStart) / 1000),
    },
    {
      bun_vs_node_livez: ratios.bun_vs_node_rps,
      bun_vs_node_livez_paired: ratios.bun_vs_node_rps_paired,
      worker_cold_ms: cold.total_ms.median,
      worker_first_readyz_ms: cold.first_readyz_ms.median,
      worker_warm_readyz_ms: warm.readyz_ms.median,
      bundle_gzip_kib: gzipKiB,
      node_boot_ms: Math.round(bootMs.node),
      bun_boot_ms: Math.round(bootMs.bun),
      failures,
    },
  );
}

await runBench(main);
