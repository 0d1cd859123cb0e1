// Worker benchmark: the real Worker bundle (`wrangler deploy --dry-run`, as `npm run build:worker`) in
// workerd via Miniflare, against a real PostgreSQL through the local Neon proxy and the Xero sandbox.
//   (i)   Warm latency, p50 and p95 over BENCH_REQUESTS sequential requests after BENCH_WARMUP_REQUESTS,
//         in BENCH_WARM_ROUNDS rounds: GET /readyz (the write probe), then POST /api/invoices with an
//         organization's API key and a connected tenant (each queues a push, and the push tick runs in
//         the request's waitUntil; Xero's 60 a minute per tenant leave most of them nothing to claim).
//   (ii)  Cold start: BENCH_COLD_CONCURRENCY concurrent first requests (/readyz) on a fresh Miniflare, a
//         new workerd with one isolate; the Worker's `isolate booted` and `isolate boot failed` lines
//         count the boots that isolate ran (target 1), BENCH_COLD_SAMPLES times.
//   (iii) Access-token cache: BENCH_CRON_PUSHES invoices queued over BENCH_CRON_TENANTS connected
//         tenants (one organization and grant each), then the scheduled() handler invoked as the cron
//         trigger would until all are pushed (Xero's 5 in flight per tenant make that several
//         invocations); the hits and misses are summed from the push tick's `push tick done` lines,
//         as are those of the pushes (i) triggered per request.
// With BENCH_BASELINE_REF=<git ref>, the Worker of that commit is bundled too and every phase runs both
// (the baseline first), side by side, with ratios: current ÷ baseline. A baseline without the cache
// counters reports them as nan. It reports figures; it never fails on them (tests assert, benchmarks
// report). Run: `npm run bench:worker`. Knobs: BENCH_REQUESTS, BENCH_WARMUP_REQUESTS,
// BENCH_WARM_ROUNDS, BENCH_COLD_CONCURRENCY, BENCH_COLD_SAMPLES, BENCH_CRON_PUSHES, BENCH_CRON_TENANTS, BENCH_BASELINE_REF.
import { execFileSync } from 'node:child_process';
import { symlinkSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import type { Miniflare, RequestInit as MiniflareRequestInit } from 'miniflare';
import pg from 'pg';
import { startNeonProxy } from '../dev/neon-proxy/server.js';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { freshDatabase } from '../test/support/databases.js';
import { invoiceBody } from '../test/support/orgs.js';
import { type Cluster, startCluster } from '../test/support/postgres.js';
import { repoRoot, TEST_TOKEN_KEY } from '../test/support/server.js';
import {
  captureLog,
  connectedOrganization,
  openDatabase,
  queuePush,
  type Sandbox,
  sandboxEnv,
  testBox,
} from '../test/support/ticks.js';
import { runBench, tempDir, track, untrack } from './support/lifecycle.js';
import { intEnv, printResults, progress, table } from './support/report.js';
import { median, percentile, round1, round2, round3 } from './support/stats.js';
import { buildWorkerBundle, neonUrl, startMiniflare, type WorkerBundle } from './support/worker-bundle.js';

const REQUESTS = intEnv('BENCH_REQUESTS', 200);
const WARMUP = intEnv('BENCH_WARMUP_REQUESTS', 20);
const COLD_CONCURRENCY = intEnv('BENCH_COLD_CONCURRENCY', 20);
const COLD_SAMPLES = intEnv('BENCH_COLD_SAMPLES', 3);
// The timed requests of each Worker in this many rounds, alternated when there is a baseline.
const WARM_ROUNDS = intEnv('BENCH_WARM_ROUNDS', 4);
const CRON_PUSHES = intEnv('BENCH_CRON_PUSHES', 200);
// 50 a tenant: within Xero's 60 a minute, so no invocation waits on the minute, only on the 5 in flight.
const CRON_TENANTS = intEnv('BENCH_CRON_TENANTS', 4);
const BASELINE_REF = process.env.BENCH_BASELINE_REF || undefined;
// Enough for the pushes at 5 per tenant per invocation, with room for a deferred one.
const MAX_INVOCATIONS = Math.ceil(CRON_PUSHES / CRON_TENANTS / 5) * 2 + 5;

type LogLine = Record<string, unknown> & { msg: string };

/** The Worker's JSON log lines, as workerd writes them. */
class WorkerLog {
  readonly lines: LogLine[] = [];
  #lastAt = performance.now();

  readonly onLine = (raw: string): void => {
    this.#lastAt = performance.now();
    const at = raw.indexOf('{');
    if (at === -1) return;
    try {
      const line = JSON.parse(raw.slice(at)) as unknown;
      if (line && typeof line === 'object' && typeof (line as LogLine).msg === 'string') {
        this.lines.push(line as LogLine);
      }
    } catch {
      // Not one of the Worker's lines (workerd's own output).
    }
  };

  count(msg: string, from = 0): number {
    return this.lines.slice(from).filter((l) => l.msg === msg).length;
  }

  /** Until workerd has written nothing for `quietMs`: the lines of waitUntil work have arrived. */
  async settle(quietMs = 300, maxMs = 10_000): Promise<void> {
    const started = performance.now();
    while (performance.now() - this.#lastAt < quietMs && performance.now() - started < maxMs) {
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** The token-cache counts of the push tick's summary lines from index `from`. */
  tokenCache(from = 0) {
    const runs = this.lines.slice(from).filter((l) => l.msg === 'push tick done');
    // No summary line at all: a Worker from before the line existed, not a run without lookups.
    const sum = (field: string) =>
      runs.length > 0 && runs.every((l) => typeof l[field] === 'number')
        ? runs.reduce((n, l) => n + (l[field] as number), 0)
        : Number.NaN;
    return {
      runs: runs.length,
      pushed: sum('pushed'),
      hits: sum('token_cache_hits'),
      misses: sum('token_cache_misses'),
    };
  }
}

interface Variant {
  name: 'baseline' | 'current';
  label: string;
  bundle: WorkerBundle;
}

interface Env {
  cluster: Cluster;
  sandbox: Sandbox;
  proxyUrl: string;
}

function worker(variant: Variant, env: Env, databaseUrl: string, log: WorkerLog): Miniflare {
  return startMiniflare(
    variant.bundle,
    {
      DATABASE_URL: neonUrl(databaseUrl),
      NEON_LOCAL_PROXY: env.proxyUrl,
      TOKEN_ENCRYPTION_KEY: TEST_TOKEN_KEY,
      // Info: the boot lines and the push tick's summary are what (ii) and (iii) count.
      LOG_LEVEL: 'info',
      // The per-key rate limit stays on the path, set above the load (an older bundle ignores it).
      API_RATE_PER_MINUTE: '6000000',
      API_RATE_BURST: '100000',
      ...sandboxEnv(env.sandbox),
    },
    log.onLine,
  );
}

/** A migrated database (Workers never migrate: the deploy command does, as npm run db:migrate). */
async function migratedDatabase(env: Env, prefix: string) {
  const url = await freshDatabase(env.cluster, prefix);
  const handle = await openDatabase(url, captureLog().log);
  return { url, handle };
}

async function timed(mf: Miniflare, path: string, init: MiniflareRequestInit | undefined, expect: number) {
  const started = performance.now();
  const res = await mf.dispatchFetch(`http://worker${path}`, init);
  const body = await res.text();
  const ms = performance.now() - started;
  if (res.status !== expect) throw new Error(`Worker ${path}: ${res.status} ${body.slice(0, 300)}`);
  return ms;
}

const dist = (values: readonly number[]) => ({
  p50: round2(percentile(values, 50)),
  p95: round2(percentile(values, 95)),
  n: values.length,
});

interface WarmWorker {
  variant: Variant;
  mf: Miniflare;
  log: WorkerLog;
  apiKey: string;
  readyz: number[];
  invoices: number[];
}

/** ABBA rounds: with a baseline, neither Worker always goes first, and both see the same noise. */
const roundOrder = <T>(items: readonly T[], round: number): T[] =>
  round % 2 === 0 ? [...items] : [...items].reverse();

async function warmPhase(variants: readonly Variant[], env: Env) {
  const workers: WarmWorker[] = [];
  for (const variant of variants) {
    const { url, handle } = await migratedDatabase(env, `bench_worker_warm_${variant.name}`);
    const { org } = await connectedOrganization(
      handle.db,
      await testBox(),
      env.sandbox,
      `Warm ${variant.name}`,
    );
    await handle.close();
    const log = new WorkerLog();
    const mf = worker(variant, env, url, log);
    track(`miniflare warm ${variant.name}`, () => mf.dispose());
    await mf.ready;
    workers.push({ variant, mf, log, apiKey: org.apiKey, readyz: [], invoices: [] });
  }
  const readyz = (w: WarmWorker) => timed(w.mf, '/readyz', undefined, 200);
  const post = (w: WarmWorker, key: string) =>
    timed(
      w.mf,
      '/api/invoices',
      {
        method: 'POST',
        headers: {
          authorization: `Bearer ${w.apiKey}`,
          'content-type': 'application/json',
          'idempotency-key': key,
        },
        body: JSON.stringify(invoiceBody()),
      },
      202,
    );
  const perRound = Math.ceil(REQUESTS / WARM_ROUNDS);
  for (const w of workers) for (let i = 0; i < WARMUP; i++) await readyz(w);
  for (let round = 0; round < WARM_ROUNDS; round++) {
    for (const w of roundOrder(workers, round)) {
      for (let i = 0; i < perRound && w.readyz.length < REQUESTS; i++) w.readyz.push(await readyz(w));
    }
  }
  const from = new Map(workers.map((w) => [w, w.log.lines.length]));
  for (const w of workers) for (let i = 0; i < WARMUP; i++) await post(w, `warmup-${i}`);
  for (let round = 0; round < WARM_ROUNDS; round++) {
    for (const w of roundOrder(workers, round)) {
      for (let i = 0; i < perRound && w.invoices.length < REQUESTS; i++) {
        w.invoices.push(await post(w, `bench-${w.invoices.length}`));
      }
    }
  }
  const results = new Map<string, Figures['warm']>();
  for (const w of workers) {
    await w.log.settle(1000);
    const tokens = w.log.tokenCache(from.get(w));
    await untrack(`miniflare warm ${w.variant.name}`);
    const result = { readyz: dist(w.readyz), invoices: dist(w.invoices), requestTokens: tokens };
    progress(
      `${w.variant.label} warm: /readyz p50 ${result.readyz.p50} ms p95 ${result.readyz.p95} ms; POST ` +
        `/api/invoices p50 ${result.invoices.p50} ms p95 ${result.invoices.p95} ms; per-request push ticks ` +
        `${tokens.runs}, token cache ${tokens.hits} hits ${tokens.misses} misses`,
    );
    results.set(w.variant.name, result);
  }
  return results;
}

async function coldPhase(variant: Variant, env: Env) {
  const { url, handle } = await migratedDatabase(env, `bench_worker_cold_${variant.name}`);
  await handle.close();
  const samples: { boots: number; failed: number; allAnsweredMs: number; non200: number }[] = [];
  for (let i = 1; i <= COLD_SAMPLES; i++) {
    const log = new WorkerLog();
    const mf = worker(variant, env, url, log);
    track(`miniflare cold ${variant.name}`, () => mf.dispose());
    await mf.ready;
    const started = performance.now();
    const statuses = await Promise.all(
      Array.from({ length: COLD_CONCURRENCY }, async () => {
        const res = await mf.dispatchFetch('http://worker/readyz');
        await res.arrayBuffer();
        return res.status;
      }),
    );
    const allAnsweredMs = performance.now() - started;
    await log.settle();
    const sample = {
      boots: log.count('isolate booted'),
      failed: log.count('isolate boot failed'),
      allAnsweredMs: round1(allAnsweredMs),
      non200: statuses.filter((s) => s !== 200).length,
    };
    samples.push(sample);
    progress(
      `${variant.label} cold ${i}/${COLD_SAMPLES}: ${COLD_CONCURRENCY} concurrent first /readyz → ` +
        `${sample.boots} boots, ${sample.failed} failed, all answered in ${Math.round(allAnsweredMs)} ms, ` +
        `${sample.non200} not 200`,
    );
    await untrack(`miniflare cold ${variant.name}`);
  }
  const attempts = samples.map((s) => s.boots + s.failed);
  return {
    samples,
    boots_per_isolate: median(attempts),
    boots_per_isolate_max: Math.max(...attempts),
    all_answered_ms: round1(median(samples.map((s) => s.allAnsweredMs))),
    non200: samples.reduce((n, s) => n + s.non200, 0),
  };
}

async function cronPhase(variant: Variant, env: Env) {
  const { url, handle } = await migratedDatabase(env, `bench_worker_cron_${variant.name}`);
  const box = await testBox();
  const orgs = [];
  for (let t = 0; t < CRON_TENANTS; t++) {
    orgs.push((await connectedOrganization(handle.db, box, env.sandbox, `Cron ${variant.name} ${t}`)).org);
  }
  for (let i = 0; i < CRON_PUSHES; i++) {
    await queuePush(handle.db, (orgs[i % CRON_TENANTS] as { id: string }).id, `cron-${i}`);
  }
  await handle.close();
  const direct = new pg.Client(url);
  await direct.connect();
  track(`cron db ${variant.name}`, () => direct.end());
  const pushed = async () =>
    (await direct.query(`SELECT count(*)::int AS n FROM invoice_pushes WHERE status = 'pushed'`)).rows[0]
      .n as number;
  const log = new WorkerLog();
  const mf = worker(variant, env, url, log);
  track(`miniflare cron ${variant.name}`, () => mf.dispose());
  await mf.ready;
  // Miniflare's Fetcher type comes from its own bundled workers-types; only this method is needed.
  const fetcher = (await mf.getWorker()) as unknown as { scheduled(o: { cron: string }): Promise<unknown> };
  let invocations = 0;
  let done = 0;
  const started = performance.now();
  while (invocations < MAX_INVOCATIONS && done < CRON_PUSHES) {
    await fetcher.scheduled({ cron: '* * * * *' });
    invocations += 1;
    done = await pushed();
  }
  const wallMs = performance.now() - started;
  await log.settle();
  const tokens = log.tokenCache();
  await untrack(`miniflare cron ${variant.name}`);
  await untrack(`cron db ${variant.name}`);
  const result = {
    invocations,
    pushed: done,
    push_runs: tokens.runs,
    token_cache_hits: tokens.hits,
    token_cache_misses: tokens.misses,
    hit_ratio: round3(tokens.hits / (tokens.hits + tokens.misses)),
    wall_ms: Math.round(wallMs),
  };
  progress(
    `${variant.label} cron: ${done}/${CRON_PUSHES} pushed over ${invocations} invocations (${CRON_TENANTS} tenants), ` +
      `token cache ${tokens.hits} hits ${tokens.misses} misses`,
  );
  return result;
}

/** The Worker of another commit: its tree exported to a temp dir, bundled with this checkout's modules. */
function baselineBundle(ref: string): WorkerBundle {
  const commit = execFileSync('git', ['rev-parse', '--short', `${ref}^{commit}`], { cwd: repoRoot })
    .toString()
    .trim();
  const src = tempDir('bench-worker-baseline-src-');
  const tar = join(src, 'tree.tar');
  execFileSync('git', ['archive', '--format=tar', '-o', tar, commit], { cwd: repoRoot });
  execFileSync('tar', ['-xf', tar, '-C', src]);
  symlinkSync(resolve(repoRoot, 'node_modules'), join(src, 'node_modules'), 'dir');
  return buildWorkerBundle(tempDir('bench-worker-baseline-'), src);
}

interface WarmFigures {
  readyz: ReturnType<typeof dist>;
  invoices: ReturnType<typeof dist>;
  requestTokens: ReturnType<WorkerLog['tokenCache']>;
}

type Figures = {
  warm: WarmFigures;
  cold: Awaited<ReturnType<typeof coldPhase>>;
  cron: Awaited<ReturnType<typeof cronPhase>>;
};

async function main(): Promise<void> {
  const wallStart = performance.now();
  const loadBefore = loadavg()[0] ?? 0;
  progress(
    `worker bench: ${WARMUP}+${REQUESTS} warm requests each; ${COLD_SAMPLES}× ${COLD_CONCURRENCY} concurrent cold ` +
      `requests; ${CRON_PUSHES} cron pushes over ${CRON_TENANTS} tenants; ${availableParallelism()} cores` +
      (BASELINE_REF ? `; baseline ${BASELINE_REF}` : ''),
  );
  progress('bundling the Worker (wrangler deploy --dry-run)');
  const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: repoRoot }).toString().trim();
  const variants: Variant[] = [];
  if (BASELINE_REF) {
    progress(`bundling the baseline Worker of ${BASELINE_REF}`);
    variants.push({
      name: 'baseline',
      label: `baseline ${BASELINE_REF}`,
      bundle: baselineBundle(BASELINE_REF),
    });
  }
  variants.push({
    name: 'current',
    label: `current ${head}`,
    bundle: buildWorkerBundle(tempDir('bench-worker-')),
  });

  progress('starting a throwaway PostgreSQL cluster, the local Neon proxy and the Xero sandbox');
  const [cluster, sandbox] = await Promise.all([startCluster(), startXeroSandbox({ port: 0 })]);
  track('cluster', () => cluster.remove());
  track('xero sandbox', () => sandbox.close());
  const proxy = await startNeonProxy({ upstream: cluster.url() });
  track('neon proxy', () => proxy.close());
  const env: Env = { cluster, sandbox, proxyUrl: proxy.url };

  // Phase by phase, so both Workers see the machine in a like state: the warm requests in alternated
  // rounds, the cold starts and cron runs the baseline first.
  const warm = await warmPhase(variants, env);
  const cold = new Map<string, Figures['cold']>();
  const cron = new Map<string, Figures['cron']>();
  for (const v of variants) cold.set(v.name, await coldPhase(v, env));
  for (const v of variants) cron.set(v.name, await cronPhase(v, env));
  await untrack('neon proxy');
  await untrack('xero sandbox');
  await untrack('cluster');

  const figures = (name: string): Figures => ({
    warm: warm.get(name) as Figures['warm'],
    cold: cold.get(name) as Figures['cold'],
    cron: cron.get(name) as Figures['cron'],
  });
  const current = figures('current');
  const baseline = BASELINE_REF ? figures('baseline') : undefined;
  const n = (v: number) => (Number.isFinite(v) ? String(v) : '—');
  const rows = (f: Figures): [string, string][] => [
    [`warm GET /readyz p50 ms`, f.warm.readyz.p50.toFixed(2)],
    [`warm GET /readyz p95 ms`, f.warm.readyz.p95.toFixed(2)],
    [`warm POST /api/invoices p50 ms`, f.warm.invoices.p50.toFixed(2)],
    [`warm POST /api/invoices p95 ms`, f.warm.invoices.p95.toFixed(2)],
    [
      `per-request push ticks that claimed (summary lines, ${WARMUP + REQUESTS} POSTs)`,
      String(f.warm.requestTokens.runs),
    ],
    ['  their token-cache hits', n(f.warm.requestTokens.hits)],
    ['  their token-cache misses', n(f.warm.requestTokens.misses)],
    [
      `cold: isolate boots, ${COLD_CONCURRENCY} concurrent first requests (median)`,
      String(f.cold.boots_per_isolate),
    ],
    ['cold: isolate boots, worst sample', String(f.cold.boots_per_isolate_max)],
    ['cold: all answered, ms (median)', f.cold.all_answered_ms.toFixed(1)],
    ['cold: answers not 200', String(f.cold.non200)],
    [`cron: invoices pushed of ${CRON_PUSHES}`, String(f.cron.pushed)],
    ['cron: scheduled() invocations', String(f.cron.invocations)],
    ['cron: push ticks that claimed (summary lines)', String(f.cron.push_runs)],
    ['cron: token-cache hits', n(f.cron.token_cache_hits)],
    ['cron: token-cache misses', n(f.cron.token_cache_misses)],
    ['cron: token-cache hit ratio', n(f.cron.hit_ratio)],
  ];
  const loadAfter = loadavg()[0] ?? 0;
  console.log('');
  console.log(
    `Worker in workerd (Miniflare) — ${availableParallelism()} cores, 1-min load average ` +
      `${loadBefore.toFixed(1)} at start, ${loadAfter.toFixed(1)} at end; ${REQUESTS} timed requests after ` +
      `${WARMUP} warm-up; cron pushes over ${CRON_TENANTS} tenants`,
  );
  console.log('');
  const currentRows = rows(current);
  if (baseline) {
    const baseRows = rows(baseline);
    console.log(
      table([
        ['figure', `baseline ${BASELINE_REF}`, `current ${head}`],
        ...currentRows.map(([name, value], i) => [name, baseRows[i]?.[1] ?? '', value]),
      ]),
    );
  } else {
    console.log(table([['figure', `current ${head}`], ...currentRows]));
  }
  const result = (f: Figures) => ({
    warm_readyz_p50_ms: f.warm.readyz.p50,
    warm_readyz_p95_ms: f.warm.readyz.p95,
    invoices_p50_ms: f.warm.invoices.p50,
    invoices_p95_ms: f.warm.invoices.p95,
    cold_boots_per_isolate: f.cold.boots_per_isolate,
    cold_boots_max: f.cold.boots_per_isolate_max,
    token_cache_hits: f.cron.token_cache_hits,
    token_cache_misses: f.cron.token_cache_misses,
    cron_pushed: f.cron.pushed,
    cron_invocations: f.cron.invocations,
    request_token_cache_hits: f.warm.requestTokens.hits,
    request_token_cache_misses: f.warm.requestTokens.misses,
  });
  const line: Record<string, number> = result(current);
  if (baseline) {
    const base = result(baseline);
    for (const [name, value] of Object.entries(base)) line[`baseline_${name}`] = value;
    // Below 1 is faster (or fewer) than the baseline.
    line.warm_readyz_p50_vs_baseline = current.warm.readyz.p50 / baseline.warm.readyz.p50;
    line.invoices_p50_vs_baseline = current.warm.invoices.p50 / baseline.warm.invoices.p50;
    line.invoices_p95_vs_baseline = current.warm.invoices.p95 / baseline.warm.invoices.p95;
  }
  printResults(
    'worker',
    {
      head,
      baseline_ref: BASELINE_REF ?? null,
      requests: REQUESTS,
      warmup_requests: WARMUP,
      cold_concurrency: COLD_CONCURRENCY,
      cold_samples: COLD_SAMPLES,
      cron_pushes: CRON_PUSHES,
      cron_tenants: CRON_TENANTS,
      current,
      ...(baseline && { baseline }),
      loadavg_1m: { start: round2(loadBefore), end: round2(loadAfter) },
      wall_s: round2((performance.now() - wallStart) / 1000),
    },
    line,
  );
}

await runBench(main);
