// Claim at scale: what one budgeted claim (src/app/push/claim.ts) costs as connected tenants
// grow from 20 to 10,000, on real PostgreSQL. Every tenant is connected and sendable; 20 of them hold a
// backlog. Each tenant count is measured with full windows (every tenant's day holding 2,080 calls, the
// app's minute 5,040) and with empty ones, in alternating order over BENCH_ROUNDS rounds. Per claim of BENCH_BATCH pushes: its time, the WAL
// it wrote (pg_current_wal_lsn before and after) and the cluster's CPU. The settle that gives the
// budget back runs after each claim, outside what is measured. Then, at the largest count, 1, 3 and 6
// claimers claim and settle back to back (the minute lifted, Xero's 5 in flight kept; a claimer whose
// claim came back empty waits BENCH_EMPTY_WAIT_MS, as a tick waits for its next run), in alternating
// order over BENCH_CONTENTION_ROUNDS rounds, each on a fresh backlog; pg_stat_activity is sampled for
// the share of samples in which a claim waited on a lock, and every claimed push is checked against
// those claimed before it in the run (a push claimed twice is a duplicate).
// Before that, BENCH_HISTORY (1,000,000) pushed and dead pushes are added (half over every tenant, half
// over the 20 with a backlog) and the claim is measured again, with one EXPLAIN ANALYZE: the rows it
// read of invoice_pushes, and no sequential scan.
// Last line: `result: claim_ms_20=… claim_ms_2000=… claim_ms_10000=… scale_ratio=… wal_bytes_per_push=…
// full_vs_empty=… … claimers_3_vs_1=… claimers_6_vs_1=… claimers_duplicates=…` (medians; wal over the
// full-window claims at the largest count; claimers_N_vs_1: pushes per second with N claimers ÷ with one,
// targets ≥ 1.0 with 0 duplicates).

import type { DatabaseHandle } from '@honest-health/platform/db';
import pg from 'pg';
import { createOrganization } from '../src/app/organizations.js';
import { subWindows, XERO_BUDGET, type XeroBudget } from '../src/app/push/budget.js';
import { claimPushes, type SendRecord } from '../src/app/push/claim.js';
import { settlePushes } from '../src/app/push/settle.js';
import { KEY_RESEND_WITHIN_MS } from '../src/app/push/tick.js';
import { freshDatabase } from '../test/support/databases.js';
import { startCluster } from '../test/support/postgres.js';
import { captureLog, openDatabase, queueBacklog } from '../test/support/ticks.js';
import { clusterCpu, clusterCpuDelta, machineBusySeconds } from './support/cpu.js';
import { intEnv, printResults, progress, table, verdict } from './support/report.js';
import { median, percentile, round1, round3 } from './support/stats.js';

const COUNTS = (process.env.BENCH_TENANT_COUNTS ?? '20,2000,10000').split(',').map(Number);
const CLAIMS = intEnv('BENCH_CLAIMS', 10);
const ROUNDS = intEnv('BENCH_ROUNDS', 2);
const BATCH = intEnv('BENCH_BATCH', 50);
// As the push tick records its sends: the marker is as long as a deployed server's.
const SENDS: SendRecord = {
  markerPrefix: 'https://honest-health.example.com/api/invoices/',
  resendWithinMs: KEY_RESEND_WITHIN_MS,
};
const BACKLOG_TENANTS = 20;
const BACKLOG_EACH = intEnv('BENCH_BACKLOG_EACH', 2500);
const CONTENTION_S = intEnv('BENCH_CONTENTION_S', 5);
const CLAIMERS = (process.env.BENCH_CLAIMERS ?? '1,3,6').split(',').map(Number);
// The claimer counts run in alternating order over this many rounds; a ratio is the median of its rounds'.
const CONTENTION_ROUNDS = intEnv('BENCH_CONTENTION_ROUNDS', 2);
/** How long a claimer whose claim came back empty waits before its next: TICK_INTERVAL_MS's least. */
const EMPTY_WAIT_MS = intEnv('BENCH_EMPTY_WAIT_MS', 100);
/** Settled (pushed and dead) pushes added before the last measurement. */
const HISTORY = intEnv('BENCH_HISTORY', 1_000_000);

const minute = subWindows(XERO_BUDGET, 'minute');
const day = subWindows(XERO_BUDGET, 'day');
/** Contention runs claim as fast as they can: Xero's 5 in flight kept, the minute and day lifted. */
const LIFTED: XeroBudget = { ...XERO_BUDGET, perMinute: 1e8, perDay: 1e8, appPerMinute: 1e8 };

const cluster = await startCluster();
const { log } = captureLog();
const handles: DatabaseHandle[] = [];
try {
  const url = await freshDatabase(cluster, 'claim_scale');
  const handle = await openDatabase(url, log);
  handles.push(handle);
  const sql = new pg.Client(url);
  await sql.connect();
  const org = await createOrganization(handle.db, 'Claim Scale');

  /** `n` more connected, sendable tenants, each with its own grant. */
  async function addTenants(n: number): Promise<string[]> {
    const { rows } = await sql.query<{ id: string }>(
      `WITH g AS (
         INSERT INTO xero_grants (organization_id, scope, access_token_enc, refresh_token_enc, access_expires_at)
         SELECT $1, 'offline_access accounting.invoices', 'sealed', 'sealed', now() + interval '1 day'
         FROM generate_series(1, $2::int) RETURNING id)
       INSERT INTO xero_connections (organization_id, grant_id, tenant_id)
       SELECT $1, g.id, gen_random_uuid()::text FROM g RETURNING id`,
      [org.id, n],
    );
    return rows.map((r) => r.id);
  }

  /** Full: every tenant's day 2,080 calls (80 an hour), the app minute 5,040 (80 a second). Or empty. */
  async function windows(full: boolean): Promise<void> {
    const nowAt = (subMs: number) => `floor(extract(epoch FROM now()) * 1000 / ${subMs})::bigint`;
    await sql.query(
      full
        ? `UPDATE xero_connections SET budget_day_counts = array_fill(80, ARRAY[${day.n}]),
             budget_day_at = ${nowAt(day.subMs)}, budget_minute_counts = '{}', budget_minute_at = NULL,
             budget_slots = '{}'`
        : `UPDATE xero_connections SET budget_day_counts = '{}', budget_day_at = NULL,
             budget_minute_counts = '{}', budget_minute_at = NULL, budget_slots = '{}'`,
    );
    await sql.query(
      full
        ? `UPDATE xero_app_limits SET budget_minute_counts = array_fill(80, ARRAY[${minute.n}]),
             budget_minute_at = ${nowAt(minute.subMs)}`
        : `UPDATE xero_app_limits SET budget_minute_counts = '{}', budget_minute_at = NULL`,
    );
    await sql.query('VACUUM ANALYZE xero_connections, xero_app_limits, invoice_pushes');
  }

  /** One claim, recording its sends as the push tick's does, and its settle (every push pushed, the budget given back). */
  async function claimAndSettle(db: DatabaseHandle, owner: string, budget: XeroBudget) {
    const claim = await claimPushes(db.db, {
      owner,
      leaseMs: 60_000,
      batchSize: BATCH,
      budget,
      sends: SENDS,
    });
    return {
      claim,
      settle: async () => {
        const used = new Map(claim.grants.map((g) => [g.connectionId, g.granted]));
        await settlePushes(
          db.db,
          owner,
          claim.pushes.map((p) => ({ id: p.id, status: 'pushed' as const, xeroInvoiceId: p.id })),
          claim.grants,
          used,
        );
      },
    };
  }

  interface PlanNode {
    'Node Type'?: string;
    'Relation Name'?: string;
    'Actual Rows'?: number;
    'Actual Loops'?: number;
    'Rows Removed by Filter'?: number;
    Plans?: PlanNode[];
  }

  /** One claim under EXPLAIN ANALYZE: rows its scans read per table, and its sequential scans of pushes. */
  async function explainClaim(): Promise<{ read: Record<string, number>; seqScans: number }> {
    let root: PlanNode | undefined;
    const { sql: q } = await import('drizzle-orm');
    const explaining = {
      execute: async (query: unknown) => {
        const r = (await handle.db.execute(
          q`EXPLAIN (ANALYZE, FORMAT JSON) ${query as ReturnType<typeof q>}`,
        )) as {
          rows: { 'QUERY PLAN': { Plan: PlanNode }[] }[];
        };
        root = r.rows[0]?.['QUERY PLAN'][0]?.Plan;
        return { rows: [] };
      },
    } as unknown as DatabaseHandle['db'];
    await claimPushes(explaining, {
      owner: 'explained',
      leaseMs: 60_000,
      batchSize: BATCH,
      budget: XERO_BUDGET,
      sends: SENDS,
    });
    const read: Record<string, number> = {};
    let seqScans = 0;
    const walk = (n: PlanNode) => {
      const table = n['Relation Name'];
      if (table !== undefined) {
        const rows = (n['Actual Rows'] ?? 0) + (n['Rows Removed by Filter'] ?? 0);
        read[table] = (read[table] ?? 0) + rows * (n['Actual Loops'] ?? 1);
        if (table === 'invoice_pushes' && n['Node Type'] === 'Seq Scan') seqScans += 1;
      }
      for (const c of n.Plans ?? []) walk(c);
    };
    if (root) walk(root);
    await sql.query(
      `UPDATE invoice_pushes SET lease_owner = NULL, lease_expires_at = NULL WHERE lease_owner = 'explained'`,
    );
    return { read, seqScans };
  }

  const lsn = async () =>
    (await sql.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l')).rows[0]?.l;
  const walBetween = async (a: string, b: string) =>
    Number((await sql.query<{ d: string }>('SELECT pg_wal_lsn_diff($2, $1)::text AS d', [a, b])).rows[0]?.d);

  interface Scenario {
    tenants: number;
    history?: number;
    windows: 'full' | 'empty';
    claim_ms_median: number;
    claim_ms_p95: number;
    pushes_per_claim: number;
    wal_bytes_per_push: number;
    db_cpu_ms_per_push: number | null;
  }

  interface Samples {
    ms: number[];
    wal: number;
    claimed: number;
    cpu: number;
    cpuKnown: boolean;
  }
  const fresh = (): Samples => ({ ms: [], wal: 0, claimed: 0, cpu: 0, cpuKnown: true });

  /** Full and empty windows in alternating order, ROUNDS rounds of CLAIMS claims each. */
  async function measure(tenants: number): Promise<Scenario[]> {
    const full = fresh();
    const empty = fresh();
    for (let round = 0; round < ROUNDS; round++) {
      for (const isFull of round % 2 === 0 ? [true, false] : [false, true])
        await sample(isFull, isFull ? full : empty);
    }
    return [summary(tenants, 'full', full), summary(tenants, 'empty', empty)];
  }

  function summary(tenants: number, windows: 'full' | 'empty', s: Samples): Scenario {
    const scenario: Scenario = {
      tenants,
      windows,
      claim_ms_median: round1(median(s.ms)),
      claim_ms_p95: round1(percentile(s.ms, 95)),
      pushes_per_claim: round1(s.claimed / s.ms.length),
      wal_bytes_per_push: Math.round(s.wal / Math.max(1, s.claimed)),
      db_cpu_ms_per_push: s.cpuKnown ? round3((s.cpu * 1000) / Math.max(1, s.claimed)) : null,
    };
    progress(JSON.stringify(scenario));
    return scenario;
  }

  async function sample(full: boolean, into: Samples): Promise<void> {
    await windows(full);
    for (let i = 0; i < 3; i++) await (await claimAndSettle(handle, 'warm-up', XERO_BUDGET)).settle();
    const ms = into.ms;
    for (let i = 0; i < CLAIMS; i++) {
      const before = await lsn();
      const cpu0 = clusterCpu(cluster.dataDir);
      const t0 = performance.now();
      const { claim, settle } = await claimAndSettle(handle, `measured-${i}`, XERO_BUDGET);
      ms.push(performance.now() - t0);
      const cpu1 = clusterCpu(cluster.dataDir);
      const after = await lsn();
      if (cpu0 && cpu1) into.cpu += clusterCpuDelta(cpu0, cpu1);
      else into.cpuKnown = false;
      into.wal += await walBetween(before as string, after as string);
      into.claimed += claim.pushes.length;
      await settle();
    }
  }

  interface Contention {
    round: number;
    claimers: number;
    /** Claims that came back with no push. */
    empty_claims: number;
    claims_per_s: number;
    pushes_per_s: number;
    claim_ms_median: number;
    lock_wait_share: number;
    db_cpu_cores: number | null;
    /** Pushes claimed again while a claimer held them, or after they were settled: must be 0. */
    duplicates: number;
  }

  /** `claimers` handles claiming and settling back to back for CONTENTION_S; pg_stat_activity sampled. */
  async function contention(claimers: number, round: number): Promise<Contention> {
    await windows(false);
    // A fresh backlog for each run: the runs before it may have drained the first one.
    for (const [i, id] of backlogTenants.entries())
      await queueBacklog(handle.db, org.id, id, BACKLOG_EACH, `contention-${round}-${claimers}-${i}`);
    const own = await Promise.all(Array.from({ length: claimers }, () => openDatabase(url, log)));
    handles.push(...own);
    const ms: number[] = [];
    let pushes = 0;
    // Every claimed push is settled `pushed` at once: a push claimed twice in a run is a duplicate.
    const seen = new Set<string>();
    let duplicates = 0;
    let empty = 0;
    let samples = 0;
    let waiting = 0;
    const stopAt = performance.now() + CONTENTION_S * 1000;
    const cpu0 = clusterCpu(cluster.dataDir);
    const busy0 = machineBusySeconds();
    const sampler = (async () => {
      while (performance.now() < stopAt) {
        const { rows } = await sql.query<{ state: string; wait: string | null }>(
          `SELECT state, wait_event_type AS wait FROM pg_stat_activity
           WHERE query LIKE '/* push claim%' AND state = 'active'`,
        );
        for (const r of rows) {
          samples += 1;
          if (r.wait === 'Lock') waiting += 1;
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const started = performance.now();
    await Promise.all(
      own.map(async (db, i) => {
        while (performance.now() < stopAt) {
          const t0 = performance.now();
          const { claim, settle } = await claimAndSettle(db, `claimer-${claimers}-${i}`, LIFTED);
          ms.push(performance.now() - t0);
          pushes += claim.pushes.length;
          if (claim.pushes.length === 0) empty += 1;
          for (const p of claim.pushes) {
            if (seen.has(p.id)) duplicates += 1;
            seen.add(p.id);
          }
          await settle();
          // As a tick that claims nothing waits for its next run, rather than claiming again at once.
          if (claim.pushes.length === 0) await new Promise((r) => setTimeout(r, EMPTY_WAIT_MS));
        }
      }),
    );
    const elapsed = (performance.now() - started) / 1000;
    await sampler;
    const cpu1 = clusterCpu(cluster.dataDir);
    const busy1 = machineBusySeconds();
    await Promise.all(own.map((h) => h.close()));
    const c: Contention = {
      round,
      claimers,
      empty_claims: empty,
      claims_per_s: round1(ms.length / elapsed),
      pushes_per_s: Math.round(pushes / elapsed),
      claim_ms_median: round1(median(ms)),
      lock_wait_share: round3(samples ? waiting / samples : Number.NaN),
      db_cpu_cores: cpu0 && cpu1 ? round3(clusterCpuDelta(cpu0, cpu1) / elapsed) : null,
      duplicates,
    };
    progress(
      `${JSON.stringify(c)} (machine busy ${busy0 !== undefined && busy1 !== undefined ? round1((busy1 - busy0) / elapsed) : '?'} cores)`,
    );
    return c;
  }

  progress(`${BACKLOG_TENANTS} tenants with ${BACKLOG_EACH} pushes each`);
  const backlogTenants = await addTenants(BACKLOG_TENANTS);
  for (const [i, id] of backlogTenants.entries())
    await queueBacklog(handle.db, org.id, id, BACKLOG_EACH, `backlog-${i}`);
  let connected = BACKLOG_TENANTS;
  const scenarios: Scenario[] = [];
  for (const count of COUNTS) {
    if (count > connected) {
      progress(`connecting ${count - connected} idle tenants (${count} in all)`);
      for (let left = count - connected; left > 0; left -= 5000) await addTenants(Math.min(5000, left));
      connected = count;
    }
    scenarios.push(...(await measure(count)));
  }
  // The history: settled pushes, half of them spread over every tenant and half on the tenants with a
  // backlog (busy tenants have long histories). The claim must read none of them.
  progress(`adding ${HISTORY} pushed and dead pushes`);
  for (let done = 0; done < HISTORY; done += 200_000) {
    await sql.query(
      `INSERT INTO invoice_pushes (organization_id, connection_id, idempotency_key, request_hash, payload,
                                   status, updated_at)
       SELECT $1, CASE WHEN g % 2 = 0 THEN ids.a[1 + g / 2 % cardinality(ids.a)]
                       ELSE ($4::uuid[])[1 + g / 2 % cardinality($4::uuid[])] END,
              'history-' || g, 'test', '{}'::jsonb,
              CASE WHEN g % 10 = 0 THEN 'dead' ELSE 'pushed' END, now() - (g % 2000) * interval '1 hour'
       FROM (SELECT array_agg(id) AS a FROM xero_connections) ids, generate_series($2::int, $3::int) AS g`,
      [org.id, done + 1, Math.min(HISTORY, done + 200_000), backlogTenants],
    );
  }
  const withHistory = (await measure(connected)).map((s) => ({ ...s, history: HISTORY }));
  scenarios.push(...withHistory);
  const plan = await explainClaim();
  progress(
    `with history, one claim read ${JSON.stringify(plan.read)}; seq scans of invoice_pushes: ${plan.seqScans}`,
  );

  const contentions: Contention[] = [];
  for (let round = 1; round <= CONTENTION_ROUNDS; round++)
    for (const n of round % 2 === 1 ? CLAIMERS : [...CLAIMERS].reverse())
      contentions.push(await contention(n, round));
  await sql.end();

  const full = (n: number) => scenarios.find((s) => s.tenants === n && s.windows === 'full' && !s.history);
  const empty = (n: number) => scenarios.find((s) => s.tenants === n && s.windows === 'empty' && !s.history);
  const historyFull = withHistory.find((s) => s.windows === 'full');
  const largest = Math.max(...COUNTS);
  const smallest = Math.min(...COUNTS);
  console.log(
    table([
      [
        'tenants',
        'history',
        'windows',
        'claim ms median',
        'p95',
        'pushes/claim',
        'WAL B/push',
        'db CPU ms/push',
      ],
      ...scenarios.map((s) => [
        String(s.tenants),
        String(s.history ?? 0),
        s.windows,
        String(s.claim_ms_median),
        String(s.claim_ms_p95),
        String(s.pushes_per_claim),
        String(s.wal_bytes_per_push),
        String(s.db_cpu_ms_per_push ?? 'n/a'),
      ]),
    ]),
  );
  console.log(
    table([
      [
        'round',
        'claimers',
        'claims/s',
        'empty claims',
        'pushes/s',
        'claim ms median',
        'lock-wait share',
        'db CPU cores',
        'duplicates',
      ],
      ...contentions.map((c) => [
        String(c.round),
        String(c.claimers),
        String(c.claims_per_s),
        String(c.empty_claims),
        String(c.pushes_per_s),
        String(c.claim_ms_median),
        String(c.lock_wait_share),
        String(c.db_cpu_cores ?? 'n/a'),
        String(c.duplicates),
      ]),
    ]),
  );
  const duplicates = contentions.reduce((n, c) => n + c.duplicates, 0);
  const checks: [string, number, string, boolean][] = [
    ['claimers_3_vs_1', ratio(contentions, 3), '≥ 1.0', ratio(contentions, 3) >= 1],
    ['claimers_6_vs_1', ratio(contentions, 6), '≥ 1.0', ratio(contentions, 6) >= 1],
    ['claimers_duplicates', duplicates, '= 0', duplicates === 0],
  ];
  console.log(
    table([
      ['check', 'value', 'target', 'result'],
      ...checks.map(([name, value, target, ok]) => [name, String(round3(value)), target, verdict(ok)]),
    ]),
  );
  const ms = (n: number) => full(n)?.claim_ms_median;
  printResults(
    'claim-scale',
    {
      batch: BATCH,
      claims: CLAIMS,
      history: HISTORY,
      scenarios,
      contention: contentions,
      history_plan: plan,
    },
    {
      claim_ms_20: ms(20),
      claim_ms_2000: ms(2000),
      claim_ms_10000: ms(10000),
      scale_ratio: (ms(largest) ?? Number.NaN) / (ms(smallest) ?? Number.NaN),
      wal_bytes_per_push: full(largest)?.wal_bytes_per_push,
      full_vs_empty: (ms(largest) ?? Number.NaN) / (empty(largest)?.claim_ms_median ?? Number.NaN),
      history_vs_none: (historyFull?.claim_ms_median ?? Number.NaN) / (ms(largest) ?? Number.NaN),
      history_seq_scans: plan.seqScans,
      history_push_rows_read: plan.read.invoice_pushes,
      claimers_3_vs_1: ratio(contentions, 3),
      claimers_6_vs_1: ratio(contentions, 6),
      claimers_duplicates: duplicates,
    },
  );
} finally {
  await Promise.all(handles.map((h) => h.close().catch(() => {})));
  await cluster.remove();
}

/** Pushes per second with `n` claimers ÷ with one, in the same round; the median over rounds. */
function ratio(
  runs: readonly { round: number; claimers: number; pushes_per_s: number }[],
  n: number,
): number {
  const perRound = runs
    .filter((r) => r.claimers === n)
    .map((many) => {
      const one = runs.find((r) => r.claimers === 1 && r.round === many.round)?.pushes_per_s;
      return one ? many.pushes_per_s / one : Number.NaN;
    });
  return perRound.length > 0 ? median(perRound) : Number.NaN;
}
