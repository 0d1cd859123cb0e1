// HTTP benchmark: our server against a bare Hono hello-world on the same machine, plus boot-to-ready
// times. It reports figures and marks missed targets; it never fails on them (tests assert, benchmarks
// report). Run after a build: `npm run bench:http`. Knobs: BENCH_CONNECTIONS, BENCH_DURATION_S,
// BENCH_WARMUP_S, BENCH_ROUNDS.
import { availableParallelism, loadavg } from 'node:os';
import pg from 'pg';
import { startCluster } from '../test/support/postgres.js';
import type { SpawnOptions } from '../test/support/server.js';
import { spawnBareHono } from './support/bare.js';
import { bootToReady, stopServer, trackServer } from './support/boot.js';
import { removeTempDir, runBench, tempDir, track, untrack } from './support/lifecycle.js';
import { describeRun, type LoadResult, pairedRatio, runLoad, summariseLoad } from './support/load.js';
import { intEnv, missedChecks, printResults, progress, table, verdict } from './support/report.js';
import { median, round1, round2, round3 } from './support/stats.js';

// Two cores shared by the load generator, the server under test and (for /readyz) Postgres: modest
// concurrency, short runs, alternated so that drift hits both servers alike. More, shorter rounds make
// the median sturdier against bursts from whatever else shares the machine.
const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 50);
const DURATION_S = intEnv('BENCH_DURATION_S', 4);
const WARMUP_S = intEnv('BENCH_WARMUP_S', 1);
const ROUNDS = intEnv('BENCH_ROUNDS', 4);
const PG_BOOTS = 5;
const PGLITE_REOPENS = 3;
const POLL_MS = 20;
// After a /readyz run Postgres still has WAL and dirty pages to write out; let it settle first.
const SETTLE_MS = 500;

const TARGET = { livezVsBare: 0.95, readyzVsLivez: 0.5, pgBootMs: 1000 } as const;
// A /livez run during which other processes kept more than this many cores busy was disturbed.
const NOISY_CORES = 0.5;

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
const boot = (options: Omit<SpawnOptions, 'port'>) => bootToReady(options, POLL_MS);

/** Sum of the probe's write counter: every /readyz that reached Postgres added one. */
async function sumBeats(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  client.on('error', () => {});
  await client.connect();
  try {
    const { rows } = await client.query<{ beats: string | null }>(
      'SELECT sum(beats)::text AS beats FROM health_heartbeat',
    );
    return Number(rows[0]?.beats ?? 0);
  } finally {
    await client.end().catch(() => {});
  }
}

type TargetName = 'bare_livez' | 'ours_livez' | 'ours_readyz';
const LABEL: Record<TargetName, string> = {
  bare_livez: 'bare  /livez',
  ours_livez: 'ours  /livez',
  ours_readyz: 'ours  /readyz',
};

async function loadPhase(dbUrl: string) {
  progress('spawning our server (migrates the fresh database) and the bare Hono baseline');
  const ours = await boot({ env: { DATABASE_URL: dbUrl, LOG_LEVEL: 'warn' } });
  const firstBootMs = ours.ms;
  const bare = await spawnBareHono();
  trackServer(bare);

  const urls: Record<TargetName, string> = {
    bare_livez: `${bare.url}/livez`,
    ours_livez: `${ours.server.url}/livez`,
    ours_readyz: `${ours.server.url}/readyz`,
  };
  const runs: Record<TargetName, LoadResult[]> = { bare_livez: [], ours_livez: [], ours_readyz: [] };
  const pids: Record<TargetName, number | undefined> = {
    bare_livez: bare.child.pid,
    ours_livez: ours.server.child.pid,
    ours_readyz: ours.server.child.pid,
  };
  const probeQps: number[] = [];
  const measure = (name: TargetName, duration = DURATION_S) =>
    runLoad(urls[name], { connections: CONNECTIONS, duration, serverPid: pids[name] });

  for (const name of Object.keys(urls) as TargetName[]) {
    progress(`warm-up ${LABEL[name]} (${WARMUP_S} s)`);
    const warm = await measure(name, WARMUP_S);
    if (warm.non2xx + warm.errors > 0)
      progress(`  warm-up saw ${warm.non2xx} non-2xx and ${warm.errors} errors`);
  }
  await sleep(SETTLE_MS);

  const show = (round: number, name: TargetName, r: LoadResult, extra = '') =>
    progress(`round ${round}/${ROUNDS} ${LABEL[name].padEnd(13)} ${describeRun(r)}${extra}`);
  for (let round = 1; round <= ROUNDS; round++) {
    // ABBA order for the /livez pair, so neither server always runs first (or right after /readyz).
    const pair: TargetName[] = round % 2 === 1 ? ['bare_livez', 'ours_livez'] : ['ours_livez', 'bare_livez'];
    for (const name of pair) {
      const r = await measure(name);
      runs[name].push(r);
      show(round, name, r);
    }
    const before = await sumBeats(dbUrl);
    const r = await measure('ours_readyz');
    const after = await sumBeats(dbUrl);
    const qps = (after - before) / r.durationS;
    runs.ours_readyz.push(r);
    probeQps.push(qps);
    show(round, 'ours_readyz', r, `  probes ${Math.round(qps)}/s`);
    await sleep(SETTLE_MS);
  }

  await stopServer(bare);
  await stopServer(ours.server);
  return { runs, probeQps, firstBootMs };
}

async function pgBootPhase(dbUrl: string): Promise<number[]> {
  const times: number[] = [];
  for (let i = 1; i <= PG_BOOTS; i++) {
    const { ms, server } = await boot({ env: { DATABASE_URL: dbUrl, LOG_LEVEL: 'warn' } });
    times.push(ms);
    progress(`boot→ready local Postgres ${i}/${PG_BOOTS}: ${Math.round(ms)} ms`);
    await stopServer(server);
  }
  return times;
}

async function pgliteBootPhase(): Promise<{ initdbMs: number; reopenMs: number[] }> {
  const cwd = tempDir('bench-pglite-');
  const env = { LOG_LEVEL: 'warn' }; // no DATABASE_URL: PGlite in ./.data/pglite under cwd
  const first = await boot({ env, cwd });
  progress(`boot→ready PGlite first start (initdb): ${Math.round(first.ms)} ms`);
  await stopServer(first.server);
  const reopenMs: number[] = [];
  for (let i = 1; i <= PGLITE_REOPENS; i++) {
    const { ms, server } = await boot({ env, cwd });
    reopenMs.push(ms);
    progress(`boot→ready PGlite reopen ${i}/${PGLITE_REOPENS}: ${Math.round(ms)} ms`);
    await stopServer(server);
  }
  removeTempDir(cwd);
  return { initdbMs: first.ms, reopenMs };
}

async function main(): Promise<void> {
  const wallStart = performance.now();
  const loadBefore = loadavg()[0] ?? 0;
  progress(
    `http bench: ${CONNECTIONS} connections, ${WARMUP_S} s warm-up, ${DURATION_S} s × ${ROUNDS} rounds, ` +
      `${availableParallelism()} cores`,
  );
  progress('starting a throwaway PostgreSQL cluster');
  const cluster = await startCluster();
  track('cluster', () => cluster.remove());
  await cluster.query('CREATE DATABASE bench');
  const dbUrl = cluster.url('bench');

  const load = await loadPhase(dbUrl);
  const pgBoots = await pgBootPhase(dbUrl);
  await untrack('cluster'); // no longer needed; PGlite runs on its own
  const pglite = await pgliteBootPhase();

  const s = {
    bare_livez: summariseLoad(load.runs.bare_livez),
    ours_livez: summariseLoad(load.runs.ours_livez),
    ours_readyz: summariseLoad(load.runs.ours_readyz),
  };
  const loadAfter = loadavg()[0] ?? 0;
  const probeQps = Math.round(median(load.probeQps));
  const livezVsBare = round3(s.ours_livez.rps / s.bare_livez.rps);
  const readyzVsLivez = round3(s.ours_readyz.rps / s.ours_livez.rps);
  // The two /livez runs of a round share its conditions, so their ratio is steadier than the ratio of
  // medians when neighbours make whole rounds fast or slow.
  const pairedLivezVsBare = pairedRatio(load.runs.ours_livez, load.runs.bare_livez);
  // Informational: how much more CPU a /livez costs in our process than in the bare one (1 = same).
  const livezCpuVsBare =
    s.ours_livez.cpu_us_per_req !== null && s.bare_livez.cpu_us_per_req !== null
      ? round3(s.ours_livez.cpu_us_per_req / s.bare_livez.cpu_us_per_req)
      : null;
  const failures = Object.values(s).reduce((n, t) => n + t.non2xx + t.errors, 0);
  const pgBootMs = Math.round(median(pgBoots));
  const pgliteReopenMs = Math.round(median(pglite.reopenMs));
  const checks = {
    livez_vs_bare: livezVsBare >= TARGET.livezVsBare,
    readyz_vs_livez: readyzVsLivez >= TARGET.readyzVsLivez,
    zero_failures: failures === 0,
    pg_boot: pgBootMs <= TARGET.pgBootMs,
  };

  const loadRows = (Object.keys(s) as TargetName[]).map((name) => {
    const t = s[name];
    return [
      LABEL[name],
      String(t.rps),
      t.p99_ms.toFixed(1),
      String(t.non2xx),
      String(t.errors),
      t.cpu_us_per_req === null ? '—' : t.cpu_us_per_req.toFixed(1),
      t.rounds_rps.join(' '),
      name === 'ours_readyz'
        ? `${probeQps} probes/s (${round1(s.ours_readyz.rps / probeQps)} requests per probe)`
        : '',
    ];
  });
  console.log('');
  console.log(
    `HTTP load — ${CONNECTIONS} connections, ${DURATION_S} s per run, median of ${ROUNDS} alternated rounds; ` +
      `1-min load average ${loadBefore.toFixed(1)} at start, ${loadAfter.toFixed(1)} at end ` +
      `(${availableParallelism()} cores)`,
  );
  console.log(
    table([
      ['target', 'req/s', 'p99 ms', 'non-2xx', 'errors', 'server µs CPU/req', 'req/s per round', 'database'],
      ...loadRows,
    ]),
  );
  console.log('');
  console.log(
    table([
      ['check', 'value', 'target', 'result'],
      [
        'ours /livez ÷ bare /livez (req/s)',
        livezVsBare.toFixed(3),
        `≥ ${TARGET.livezVsBare}`,
        verdict(checks.livez_vs_bare),
      ],
      [
        'ours /readyz ÷ ours /livez (req/s)',
        readyzVsLivez.toFixed(3),
        `≥ ${TARGET.readyzVsLivez}`,
        verdict(checks.readyz_vs_livez),
      ],
      [
        'ours /livez ÷ bare /livez, per-round pairs (median)',
        String(pairedLivezVsBare ?? '—'),
        '—',
        'report',
      ],
      [
        'ours /livez ÷ bare /livez (server CPU per request)',
        livezCpuVsBare === null ? '—' : livezCpuVsBare.toFixed(3),
        '—',
        'report',
      ],
      ['non-2xx + errors, all measured runs', String(failures), '= 0', verdict(checks.zero_failures)],
      [
        `boot→ready, local Postgres, migrated (median of ${PG_BOOTS})`,
        `${pgBootMs} ms`,
        `≤ ${TARGET.pgBootMs} ms`,
        verdict(checks.pg_boot),
      ],
      [`boot→ready, PGlite reopen (median of ${PGLITE_REOPENS})`, `${pgliteReopenMs} ms`, '—', 'report'],
      ['boot→ready, PGlite first start (initdb)', `${Math.round(pglite.initdbMs)} ms`, '—', 'report'],
      ['boot→ready, local Postgres, first (migrates)', `${Math.round(load.firstBootMs)} ms`, '—', 'report'],
    ]),
  );
  const livezRuns = [...load.runs.bare_livez, ...load.runs.ours_livez];
  const noisyRuns = livezRuns.filter((r) => (r.otherCores ?? 0) > NOISY_CORES).length;
  if (noisyRuns > 0) {
    console.log('');
    console.log(
      `noise: ${noisyRuns} of ${livezRuns.length} /livez runs had more than ${NOISY_CORES} of a core busy with ` +
        'other processes (the "others" figure above); read the req/s figures with care, the CPU per request ' +
        'and per-round pair ratios are steadier',
    );
  }
  const missed = missedChecks(checks);
  printResults(
    'http',
    {
      connections: CONNECTIONS,
      duration_s: DURATION_S,
      warmup_s: WARMUP_S,
      rounds: ROUNDS,
      ...s,
      ours_readyz: { ...s.ours_readyz, probe_qps: probeQps, rounds_probe_qps: load.probeQps.map(Math.round) },
      loadavg_1m: { start: round2(loadBefore), end: round2(loadAfter) },
      noisy_livez_runs: noisyRuns,
      ratios: {
        livez_vs_bare: livezVsBare,
        readyz_vs_livez: readyzVsLivez,
        livez_vs_bare_paired: pairedLivezVsBare,
        livez_cpu_per_req_vs_bare: livezCpuVsBare,
      },
      boot_ms: {
        pg_migrated_median: pgBootMs,
        pg_migrated_runs: pgBoots.map(Math.round),
        pg_first_with_migrations: Math.round(load.firstBootMs),
        pglite_reopen_median: pgliteReopenMs,
        pglite_reopen_runs: pglite.reopenMs.map(Math.round),
        pglite_initdb: Math.round(pglite.initdbMs),
      },
      targets: {
        livez_vs_bare: TARGET.livezVsBare,
        readyz_vs_livez: TARGET.readyzVsLivez,
        pg_boot_ms: TARGET.pgBootMs,
      },
      missed,
      wall_s: round2((performance.now() - wallStart) / 1000),
    },
    {
      livez_vs_bare: livezVsBare,
      readyz_vs_livez: readyzVsLivez,
      boot_pg_ms: pgBootMs,
      livez_vs_bare_paired: pairedLivezVsBare,
      boot_pglite_reopen_ms: pgliteReopenMs,
      failures,
    },
  );
}

await runBench(main);
