// Failover benchmark: the incident, timed. A real primary and a real streaming standby sit behind the
// TCP fault proxy; two servers run side by side through it, each a child process (`node dist/node.js`):
//   fixed — this repository's build;
//   naive — a scratch copy with the fix taken out (no pool-poison classifier, a read_only probe
//           disposes nothing) and POOL_MAX_LIFETIME_S=300 (bench/support/failover-naive.ts).
// A writer per server POSTs one invoice (fresh Idempotency-Key) every 50 ms and /readyz is polled every
// 100 ms. The drill is failover drill (a): at T0 every connection is dropped and new ones lead to the
// read-only standby; just before T1 a burst of POOL_MAX concurrent reads (which a standby answers)
// fills each application pool with standby connections; at T1 new connections lead to the primary
// again while the pooled ones stay on the standby. It reports figures and marks missed targets; it never
// fails on them (tests assert, benchmarks report).
// Run after a build: `npm run -s build && npx tsx bench/failover.ts`.
// Knobs: BENCH_PINNED_MS (T0 -> T1, default 3000), BENCH_OBSERVE_MS (after T1, default 15000).
import { availableParallelism, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import {
  backends,
  createOrg,
  type Pair,
  pinnedUnderTraffic,
  postInvoice,
  type Readyz,
  startPair,
  type Timed,
  TOKEN_ENCRYPTION_KEY,
  until,
  type WriteOutcome,
} from '../test/support/failover.js';
import { waitForReplay } from '../test/support/postgres.js';
import { buildNaiveCopy } from './support/failover-naive.js';
import { type BenchServer, spawnEntry } from './support/failover-server.js';
import { cleanupAll, runBench, tempDir, track } from './support/lifecycle.js';
import { intEnv, missedChecks, printResults, progress, table, verdict } from './support/report.js';

const WRITE_EVERY_MS = 50;
const READYZ_EVERY_MS = 100;
const WARMUP_MS = 1500;
const PINNED_MS = intEnv('BENCH_PINNED_MS', 3000);
const OBSERVE_MS = intEnv('BENCH_OBSERVE_MS', 15_000);
const POOL_MAX = 10;
// After the read burst that pins the pools, before T1: lets the burst's backlog drain first.
const SETTLE_MS = 300;
const APP = 'honest-health:app';
const TARGET = { detectMs: 2500, recoverMs: 1000, failedAfterPrimary: POOL_MAX } as const;

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const round = (n: number | null) => (n === null ? null : Math.round(n));

interface Subject {
  name: 'fixed' | 'naive';
  server: BenchServer;
  url: string;
  apiKey: string;
}

function statusCounts(writes: Timed<WriteOutcome>[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const w of writes) counts[String(w.value.status)] = (counts[String(w.value.status)] ?? 0) + 1;
  return counts;
}

function analyse(
  subject: Subject,
  writes: Timed<WriteOutcome>[],
  probes: Timed<Readyz>[],
  t0: number,
  t1: number,
  end: number,
  pinnedAtT1: number | null,
) {
  // 200: a retried write found its own earlier insert (the Idempotency-Key at work), also stored.
  const failed = (w: Timed<WriteOutcome>) => w.value.status !== 202 && w.value.status !== 200;
  // Answered before T0 (a write in flight at T0 lives through the demotion).
  const before = writes.filter((w) => w.doneAt < t0);
  const pinned = writes.filter((w) => w.sentAt >= t0 && w.sentAt < t1);
  const after = writes.filter((w) => w.sentAt >= t1 && w.sentAt < end);
  // Answered while the primary was reachable, wherever they were sent: what a client saw after T1.
  const answeredAfter = writes.filter((w) => w.doneAt >= t1);
  const detect = probes.find((p) => p.sentAt >= t0 && p.value.database === 'read_only');
  const readyAgain = probes.find((p) => p.sentAt >= t1 && p.value.status === 200);
  const firstOk = after.find((w) => !failed(w));
  const lastFailure = after.filter(failed).at(-1);
  const steady = lastFailure === undefined ? firstOk : after.find((w) => w.sentAt > lastFailure.sentAt);
  // Both builds log the SQLSTATE: the fixed one as a poisoned pool, the naive one as an unhandled error.
  const readOnlyErrors = subject.server.logs.filter(
    (l) =>
      (l.msg === 'database pool poisoned' && l.reason === '25006') ||
      (l.msg === 'unhandled request error' && JSON.stringify(l.err ?? '').includes('"25006"')),
  ).length;
  const p50 = (ws: Timed<WriteOutcome>[]) => {
    const sorted = ws.map((w) => w.doneAt - w.sentAt).sort((a, b) => a - b);
    return sorted.length === 0 ? null : Math.round(sorted[Math.floor(sorted.length / 2)] ?? 0);
  };
  return {
    pinned_app_connections_at_t1: pinnedAtT1,
    write_latency_p50_ms: {
      warmup: p50(before),
      first_second_after_t1: p50(after.filter((w) => w.sentAt < t1 + 1000)),
      rest_after_t1: p50(after.filter((w) => w.sentAt >= t1 + 1000)),
    },
    writes_total: writes.length,
    failed_before_t0: before.filter(failed).length,
    failed_pinned: pinned.filter(failed).length,
    pinned_writes: pinned.length,
    failed_after_primary: after.filter(failed).length,
    writes_after_primary: after.length,
    failed_answered_after_primary: answeredAfter.filter(failed).length,
    answered_after_primary: answeredAfter.length,
    statuses_answered_after_primary: statusCounts(answeredAfter.filter(failed)),
    statuses_pinned: statusCounts(pinned),
    detect_ms: round(detect ? detect.doneAt - t0 : null),
    recover_ms: round(firstOk ? firstOk.doneAt - t1 : null),
    steady_ms: round(steady ? steady.doneAt - t1 : null),
    last_failure_after_primary_ms: round(lastFailure ? lastFailure.doneAt - t1 : null),
    recovered: firstOk !== undefined,
    failing_at_end: lastFailure !== undefined && steady === undefined,
    readyz_ok_after_primary_ms: round(readyAgain ? readyAgain.doneAt - t1 : null),
    readyz_read_only_answers: probes.filter((p) => p.value.database === 'read_only').length,
    read_only_errors_logged: readOnlyErrors,
    pool_disposals_logged: subject.server.logs.filter((l) => l.msg === 'database pool disposed').length,
  };
}

async function main(): Promise<void> {
  const wallStart = performance.now();
  const loadBefore = loadavg()[0] ?? 0;
  progress(
    `failover bench: write every ${WRITE_EVERY_MS} ms, readyz every ${READYZ_EVERY_MS} ms, pinned ${PINNED_MS} ms, ` +
      `observed ${OBSERVE_MS} ms after the primary is reachable; ${availableParallelism()} cores`,
  );

  progress('building the naive scratch copy');
  const naive = buildNaiveCopy(repoRoot, tempDir('honest-health-naive-'));
  for (const line of naive.applied) progress(`naive: ${line}`);

  progress('starting a primary, a streaming standby and the fault proxy');
  const pair: Pair = await startPair();
  track('clusters', () => pair.remove());
  const dbs = {
    fixed: await pair.freshDatabase('bench_fixed'),
    naive: await pair.freshDatabase('bench_naive'),
  };

  const common = {
    API_KEY_REFRESH_MS: '200',
    POOL_MAX: String(POOL_MAX),
    TOKEN_ENCRYPTION_KEY,
    // The per-key rate limit stays on the path, above the drill's 20 writes and 10 reads a second.
    API_RATE_PER_MINUTE: '600000',
    API_RATE_BURST: '10000',
  };
  const fixedServer = await spawnEntry('fixed', join(repoRoot, 'dist/node.js'), {
    ...common,
    DATABASE_URL: pair.proxyUrl(dbs.fixed),
  });
  track('fixed server', () => fixedServer.stop());
  const naiveServer = await spawnEntry('naive', naive.entry, {
    ...common,
    DATABASE_URL: pair.proxyUrl(dbs.naive),
    POOL_MAX_LIFETIME_S: '300',
  });
  track('naive server', () => naiveServer.stop());
  await Promise.all([fixedServer.waitForBoot(), naiveServer.waitForBoot()]);

  const subjects: Subject[] = [];
  for (const [name, server] of [
    ['fixed', fixedServer],
    ['naive', naiveServer],
  ] as const) {
    const org = await createOrg(pair.primary, dbs[name]);
    subjects.push({ name, server, url: server.url, apiKey: org.apiKey });
  }
  // The organizations must be on the standby too, or an api-key registry refresh there would forget them.
  await waitForReplay(pair.primary, pair.standby);
  for (const s of subjects) {
    const first = await until(
      () => postInvoice(s.server, s.apiKey),
      (w) => w.status === 202,
      10_000,
    );
    if (first.status !== 202)
      throw new Error(`${s.name} does not take writes (${first.status}):\n${s.server.dump()}`);
  }

  progress(
    `writing and probing; T0 after ${WARMUP_MS} ms: every connection leads to the read-only standby; ` +
      `T1 = T0 + ${PINNED_MS} ms: new connections reach the primary, pooled ones stay on the standby`,
  );
  // This process runs every client (the fault proxy has a thread of its own): its stalls delay what
  // it measures.
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  const pinnedAtT1: Record<string, number> = {};
  const run = await pinnedUnderTraffic(pair, subjects, {
    warmupMs: WARMUP_MS,
    pinnedMs: PINNED_MS,
    readBurstBeforeT1: POOL_MAX,
    settleAfterBurstMs: SETTLE_MS,
    beforeT1: async () => {
      for (const s of subjects) pinnedAtT1[s.name] = (await backends(pair.standby, dbs[s.name], APP)).length;
    },
    observeMs: OBSERVE_MS,
    writeEveryMs: WRITE_EVERY_MS,
    readyzEveryMs: READYZ_EVERY_MS,
    writeTimeoutMs: 10_000,
  });
  const { t0, t1, end } = run;
  lag.disable();
  const benchLag = { p99_ms: Math.round(lag.percentile(99) / 1e6), max_ms: Math.round(lag.max / 1e6) };

  const results = Object.fromEntries(
    subjects.map((s, i) => [
      s.name,
      analyse(s, run.writes[i] ?? [], run.probes[i] ?? [], t0, t1, end, pinnedAtT1[s.name] ?? null),
    ]),
  ) as Record<Subject['name'], ReturnType<typeof analyse>>;
  await cleanupAll();

  const { fixed, naive: n } = results;
  const ms = (v: number | null) => (v === null ? 'never' : `${v} ms`);
  const latencies = (l: Record<string, number | null>) =>
    `${Object.values(l)
      .map((v) => (v === null ? '—' : `${v}`))
      .join(' / ')} ms`;
  const checks = {
    detect: fixed.detect_ms !== null && fixed.detect_ms <= TARGET.detectMs,
    recover: fixed.recover_ms !== null && fixed.recover_ms <= TARGET.recoverMs,
    failed_after_primary: fixed.failed_answered_after_primary <= TARGET.failedAfterPrimary,
  };
  console.log('');
  console.log(
    `Failover (drill a: pinned to the demoted node) — one write per ${WRITE_EVERY_MS} ms, /readyz every ` +
      `${READYZ_EVERY_MS} ms; T0 demotion, T1 = T0 + ${PINNED_MS} ms primary reachable, observed ${OBSERVE_MS} ms`,
  );
  console.log(
    table([
      ['figure', 'fixed', 'naive', 'target (fixed)', 'result'],
      [
        'app connections on the standby at T1 (pinned)',
        String(fixed.pinned_app_connections_at_t1),
        String(n.pinned_app_connections_at_t1),
        '—',
        'report',
      ],
      [
        'time to detect (first /readyz read_only after T0)',
        ms(fixed.detect_ms),
        ms(n.detect_ms),
        `≤ ${TARGET.detectMs} ms`,
        verdict(checks.detect),
      ],
      [
        'time to recover (first stored write after T1)',
        ms(fixed.recover_ms),
        ms(n.recover_ms),
        `≤ ${TARGET.recoverMs} ms`,
        verdict(checks.recover),
      ],
      [
        'failed writes answered after T1 (primary reachable)',
        `${fixed.failed_answered_after_primary}/${fixed.answered_after_primary} ${JSON.stringify(fixed.statuses_answered_after_primary)}`,
        `${n.failed_answered_after_primary}/${n.answered_after_primary} ${JSON.stringify(n.statuses_answered_after_primary)}`,
        `≤ ${TARGET.failedAfterPrimary} (POOL_MAX)`,
        verdict(checks.failed_after_primary),
      ],
      [
        'failed writes sent after T1',
        `${fixed.failed_after_primary}/${fixed.writes_after_primary}`,
        `${n.failed_after_primary}/${n.writes_after_primary}`,
        '—',
        'report',
      ],
      ['every write stored from (after T1)', ms(fixed.steady_ms), ms(n.steady_ms), '—', 'report'],
      [
        'write latency p50: warm-up / 1st s after T1 / rest',
        latencies(fixed.write_latency_p50_ms),
        latencies(n.write_latency_p50_ms),
        '—',
        'report',
      ],
      [
        'still failing at the end of the window',
        String(fixed.failing_at_end),
        String(n.failing_at_end),
        '—',
        'report',
      ],
      [
        'failed writes T0..T1 (no writable node reachable)',
        `${fixed.failed_pinned}/${fixed.pinned_writes} ${JSON.stringify(fixed.statuses_pinned)}`,
        `${n.failed_pinned}/${n.pinned_writes} ${JSON.stringify(n.statuses_pinned)}`,
        '—',
        'report',
      ],

      [
        '/readyz 200 again (after T1)',
        ms(fixed.readyz_ok_after_primary_ms),
        ms(n.readyz_ok_after_primary_ms),
        '—',
        'report',
      ],
      [
        '25006 errors in the server log',
        String(fixed.read_only_errors_logged),
        String(n.read_only_errors_logged),
        '—',
        'report',
      ],
      [
        'failed writes answered before T0 (warm-up)',
        String(fixed.failed_before_t0),
        String(n.failed_before_t0),
        '= 0',
        'report',
      ],
    ]),
  );
  console.log(
    `(this process, which runs the clients (the fault proxy has a thread of its own), saw event-loop stalls of up to ${benchLag.max_ms} ms ` +
      `(p99 ${benchLag.p99_ms} ms); 1-min load average ${loadBefore.toFixed(1)} at start)`,
  );
  const missed = missedChecks(checks);
  printResults(
    'failover',
    {
      write_every_ms: WRITE_EVERY_MS,
      readyz_every_ms: READYZ_EVERY_MS,
      pinned_ms: PINNED_MS,
      observe_ms: OBSERVE_MS,
      pool_max: POOL_MAX,
      fixed,
      naive: n,
      naive_patches: naive.applied,
      targets: {
        detect_ms: TARGET.detectMs,
        recover_ms: TARGET.recoverMs,
        failed_after_primary: TARGET.failedAfterPrimary,
      },
      missed,
      bench_event_loop_lag: benchLag,
      loadavg_1m: {
        start: Math.round(loadBefore * 100) / 100,
        end: Math.round((loadavg()[0] ?? 0) * 100) / 100,
      },
      wall_s: Math.round((performance.now() - wallStart) / 100) / 10,
    },
    {
      detect_ms: fixed.detect_ms,
      recover_ms: fixed.recover_ms,
      failed_after_primary: fixed.failed_answered_after_primary,
      naive_detect_ms: n.detect_ms,
      naive_recover_ms: n.recover_ms,
      naive_failed_after_primary: n.failed_answered_after_primary,
    },
  );
}

await runBench(main);
