// Observability benchmark: what tracing costs a request. Four servers on one database, alike but for
// the trace exporter: none (off), a reachable OTLP/HTTP collector (on), an unreachable one (a closed
// port) and a malformed endpoint. Each answers /livez (no database) and GET /api/invoices (an
// authenticated database read), measured in alternated rounds so that drift hits all four alike; the
// ratios against "off" are taken per round. It reports figures and marks missed targets; it never
// fails on them (tests assert, benchmarks report). Run: `npm run bench:observability`. Knobs:
// BENCH_CONNECTIONS, BENCH_DURATION_S, BENCH_WARMUP_S, BENCH_ROUNDS.
import { availableParallelism, loadavg } from 'node:os';
import { freshDatabase } from '../test/support/databases.js';
import { createOrg, waitForKey } from '../test/support/orgs.js';
import { type OtlpSink, startOtlpSink } from '../test/support/otlp-sink.js';
import { freePort } from '../test/support/ports.js';
import { startCluster } from '../test/support/postgres.js';
import type { ServerProcess } from '../test/support/server.js';
import { plainDb, queuePush } from '../test/support/ticks.js';
import { bootToReady, stopServer } from './support/boot.js';
import { runBench, track } from './support/lifecycle.js';
import { describeRun, type LoadResult, pairedRatio, runLoad, summariseLoad } from './support/load.js';
import { intEnv, missedChecks, printResults, progress, table, verdict } from './support/report.js';

const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 50);
const DURATION_S = intEnv('BENCH_DURATION_S', 3);
const WARMUP_S = intEnv('BENCH_WARMUP_S', 1);
const ROUNDS = intEnv('BENCH_ROUNDS', 4);
const INVOICES = 20;
// A broken exporter must cost nothing of its own: a malformed one leaves tracing off, so it is held to
// "off"; an unreachable one still records spans, so it is held to a reachable collector ("on").
// Tracing itself is reported, not judged.
const TARGET = { brokenExporter: 0.95 } as const;
const BASELINE = { unreachable: 'on', malformed: 'off' } as const;

const MODES = ['off', 'on', 'unreachable', 'malformed'] as const;
type Mode = (typeof MODES)[number];
const ROUTES = { livez: '/livez', invoices: `/api/invoices?limit=${INVOICES}` } as const;
type Route = keyof typeof ROUTES;

async function exporterEnv(mode: Mode, sink: OtlpSink): Promise<Record<string, string>> {
  if (mode === 'on') return { OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint };
  if (mode === 'unreachable') return { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}` };
  if (mode === 'malformed') return { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318 (not a URL)' };
  return {};
}

async function main(): Promise<void> {
  const wallStart = performance.now();
  const loadBefore = loadavg()[0] ?? 0;
  progress(
    `observability bench: ${CONNECTIONS} connections, ${WARMUP_S} s warm-up, ${DURATION_S} s × ${ROUNDS} rounds, ` +
      `${availableParallelism()} cores`,
  );
  const cluster = await startCluster();
  track('cluster', () => cluster.remove());
  const sink = await startOtlpSink({ keep: false });
  track('otlp sink', () => sink.close());
  const url = await freshDatabase(cluster, 'bench');

  const servers = {} as Record<Mode, ServerProcess>;
  for (const mode of MODES) {
    progress(`starting the server with tracing ${mode}`);
    const env = { DATABASE_URL: url, LOG_LEVEL: 'warn', ...(await exporterEnv(mode, sink)) };
    servers[mode] = (await bootToReady({ env })).server;
  }
  const org = await createOrg(url, 'Bench Ltd');
  const seed = plainDb(url);
  for (let i = 0; i < INVOICES; i++) await queuePush(seed.db, org.id, `bench-${i}`);
  await seed.end();
  for (const mode of MODES) await waitForKey(servers[mode], org.apiKey);
  const headers = { authorization: `Bearer ${org.apiKey}` };

  const measure = (mode: Mode, route: Route, duration = DURATION_S) =>
    runLoad(`${servers[mode].url}${ROUTES[route]}`, {
      connections: CONNECTIONS,
      duration,
      serverPid: servers[mode].child.pid,
      ...(route === 'invoices' ? { headers } : {}),
    });

  for (const route of Object.keys(ROUTES) as Route[]) {
    for (const mode of MODES) {
      progress(`warm-up ${mode} ${ROUTES[route]} (${WARMUP_S} s)`);
      await measure(mode, route, WARMUP_S);
    }
  }

  const byMode = (): Record<Mode, LoadResult[]> => ({ off: [], on: [], unreachable: [], malformed: [] });
  const runs: Record<Route, Record<Mode, LoadResult[]>> = { livez: byMode(), invoices: byMode() };
  let spansWhileOn = 0;
  let requestsWhileOn = 0;
  for (let round = 1; round <= ROUNDS; round++) {
    for (const route of Object.keys(ROUTES) as Route[]) {
      // Rotate the order each round, so that no mode always runs first or right after another.
      const order = MODES.map((_, i) => MODES[(i + round - 1) % MODES.length] as Mode);
      for (const mode of order) {
        const before = sink.received;
        const r = await measure(mode, route);
        if (mode === 'on') {
          spansWhileOn += sink.received - before;
          requestsWhileOn += r.total;
        }
        runs[route][mode].push(r);
        progress(`round ${round}/${ROUNDS} ${mode.padEnd(11)} ${ROUTES[route].padEnd(24)} ${describeRun(r)}`);
      }
    }
  }
  // Spans still batched in the "on" server reach the collector on its next export or at shutdown.
  for (const mode of MODES) await stopServer(servers[mode]);

  const ratios = (route: Route, mode: Mode, baseline: Mode = 'off') => ({
    rps: pairedRatio(runs[route][mode], runs[route][baseline]),
    cpu: pairedRatio(runs[route][baseline], runs[route][mode], (r) => r.cpuUsPerRequest),
  });
  const rows: string[][] = [];
  const figures: Record<string, unknown> = {};
  for (const route of Object.keys(ROUTES) as Route[]) {
    for (const mode of MODES) {
      const s = summariseLoad(runs[route][mode]);
      const ratio = ratios(route, mode);
      rows.push([
        ROUTES[route],
        mode,
        String(s.rps),
        s.p99_ms.toFixed(1),
        s.cpu_us_per_req === null ? '—' : s.cpu_us_per_req.toFixed(1),
        ratio.rps === null ? '—' : ratio.rps.toFixed(3),
        ratio.cpu === null ? '—' : ratio.cpu.toFixed(3),
        String(s.non2xx + s.errors),
        s.rounds_rps.join(' '),
      ]);
      figures[`${route}_${mode}`] = { ...s, rps_vs_off: ratio.rps, cpu_efficiency_vs_off: ratio.cpu };
    }
  }
  const failures = Object.values(runs)
    .flatMap((byMode) => Object.values(byMode).flat())
    .reduce((n, r) => n + r.non2xx + r.errors, 0);
  const broken = (['unreachable', 'malformed'] as const).flatMap((mode) =>
    (Object.keys(ROUTES) as Route[]).map((route) => ({
      mode,
      route,
      baseline: BASELINE[mode],
      ratio: ratios(route, mode, BASELINE[mode]).rps,
    })),
  );
  const checks: Record<string, boolean> = { zero_failures: failures === 0 };
  for (const b of broken) checks[`${b.route}_${b.mode}`] = (b.ratio ?? 0) >= TARGET.brokenExporter;
  const spansPerRequest = requestsWhileOn > 0 ? spansWhileOn / requestsWhileOn : 0;

  console.log('');
  console.log(
    `Tracing overhead — ${CONNECTIONS} connections, ${DURATION_S} s per run, ${ROUNDS} rounds (modes rotated); ` +
      `ratios are per-round pairs against "off", median; 1-min load average ${loadBefore.toFixed(1)} at start, ` +
      `${(loadavg()[0] ?? 0).toFixed(1)} at end (${availableParallelism()} cores)`,
  );
  console.log(
    table([
      [
        'route',
        'tracing',
        'req/s',
        'p99 ms',
        'server µs CPU/req',
        'req/s ÷ off',
        'off CPU ÷ this CPU',
        'non-2xx+errors',
        'req/s per round',
      ],
      ...rows,
    ]),
  );
  console.log('');
  console.log(
    `Spans exported while "on" was measured: ${spansWhileOn} for ${requestsWhileOn} requests ` +
      `(${spansPerRequest.toFixed(2)} per request; the batch processor drops what its queue of 2048 cannot hold).`,
  );
  console.log('');
  console.log(
    table([
      ['check', 'value', 'target', 'result'],
      ...broken.map((b) => [
        `${ROUTES[b.route]} with the exporter ${b.mode} ÷ ${b.baseline} (req/s)`,
        b.ratio === null ? '—' : b.ratio.toFixed(3),
        `≥ ${TARGET.brokenExporter}`,
        verdict(checks[`${b.route}_${b.mode}`] === true),
      ]),
      ...(Object.keys(ROUTES) as Route[]).flatMap((route) => [
        [
          `${ROUTES[route]} with tracing on ÷ off (req/s)`,
          ratios(route, 'on').rps?.toFixed(3) ?? '—',
          '—',
          'report',
        ],
        [
          `${ROUTES[route]} with tracing on ÷ off (server CPU per request, off ÷ on)`,
          ratios(route, 'on').cpu?.toFixed(3) ?? '—',
          '—',
          'report',
        ],
      ]),
      [
        'non-2xx + errors, all measured runs',
        String(failures),
        '= 0',
        verdict(checks.zero_failures === true),
      ],
    ]),
  );
  printResults(
    'observability',
    {
      connections: CONNECTIONS,
      duration_s: DURATION_S,
      rounds: ROUNDS,
      ...figures,
      spans_per_request_on: spansPerRequest,
      targets: TARGET,
      missed: missedChecks(checks),
      wall_s: Math.round((performance.now() - wallStart) / 1000),
    },
    {
      livez_on_vs_off: ratios('livez', 'on').rps,
      invoices_on_vs_off: ratios('invoices', 'on').rps,
      livez_unreachable_vs_on: ratios('livez', 'unreachable', 'on').rps,
      invoices_unreachable_vs_on: ratios('invoices', 'unreachable', 'on').rps,
      livez_malformed_vs_off: ratios('livez', 'malformed').rps,
      invoices_malformed_vs_off: ratios('invoices', 'malformed').rps,
      spans_per_request: spansPerRequest,
      failures,
    },
  );
}

await runBench(main);
