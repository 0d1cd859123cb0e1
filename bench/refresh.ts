// Token refresh benchmark: Xero token calls per idle grant per day, with BENCH_GRANTS idle
// grants (no push due) on real Postgres and the Xero sandbox, whose refresh tokens expire after 60 days
// unused. The clock is shortened: each step advances the sandbox's clock and moves every grant's
// timestamps back by the same amount, then runs the refresh tick as often as one replica would in that
// time (one run a minute) or until a run claims nothing. Two policies side by side, on the same grants:
//   old — the refresh tick of BENCH_OLD_COMMIT (every active grant whose access token expires within
//         10 minutes), over BENCH_OLD_HOURS virtual hours at one-minute steps;
//   new — this tree's (ahead of a due push, else once per keep-alive cadence), over BENCH_DAYS virtual
//         days at BENCH_STEP_MINUTES steps, from refresh tokens issued uniformly over the last cadence.
// Also: the median of an empty run (the due query) with BENCH_HISTORY pushed invoices in the table, and
// whether every grant is still active at the end (past Xero's 60 days). Last line:
// `result: refresh_calls_per_idle_grant_day=… old_refresh_calls_per_idle_grant_day=…`.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import type { Database } from '@honest-health/platform';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import {
  dueGrantsQuery,
  KEEP_ALIVE_MS,
  type RefreshTickDeps,
  type RefreshTickResult,
  refreshExpiringTokens,
} from '../src/app/connections/refresh-tokens.js';
import { createXeroClient } from '../src/app/xero/client.js';
import { freshDatabase } from '../test/support/databases.js';
import { startCluster } from '../test/support/postgres.js';
import { repoRoot } from '../test/support/server.js';
import {
  captureLog,
  connectedOrganization,
  openDatabase,
  testBox,
  xeroConfigFor,
} from '../test/support/ticks.js';
import { intEnv, printResults, progress, table } from './support/report.js';

const GRANTS = intEnv('BENCH_GRANTS', 1000);
const DAYS = intEnv('BENCH_DAYS', 70);
const STEP_MINUTES = intEnv('BENCH_STEP_MINUTES', 60);
const OLD_HOURS = intEnv('BENCH_OLD_HOURS', 2);
const HISTORY = intEnv('BENCH_HISTORY', 100_000);
const OLD_COMMIT = process.env.BENCH_OLD_COMMIT ?? '7d45ccf';
const MINUTE = 60_000;
const DAY = 86_400_000;

type RefreshTick = (db: Database, deps: RefreshTickDeps) => Promise<RefreshTickResult>;

/** The old tree's refresh tick: git archive of OLD_COMMIT's src, imported beside this one. */
async function oldRefreshTick(): Promise<RefreshTick> {
  const dir = join(repoRoot, 'node_modules/.cache/refresh-old', OLD_COMMIT);
  // The path in OLD_COMMIT's tree (the tick has since moved to src/app/connections/).
  const file = join(dir, 'src/app/ticks/refresh-tokens.ts');
  if (!existsSync(file)) {
    mkdirSync(dir, { recursive: true });
    execFileSync('sh', ['-c', `git -C "${repoRoot}" archive ${OLD_COMMIT} src | tar -x -C "${dir}"`]);
  }
  const old = (await import(file)) as { refreshExpiringTokens: RefreshTick };
  return old.refreshExpiringTokens;
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: PlanNode[];
}

/** EXPLAIN ANALYZE of the due query: its time, buffers, and how it reads invoice_pushes. */
async function explainDueQuery(d: RefreshTickDeps) {
  const query = dueGrantsQuery(db, d).toSQL();
  const client = new pg.Client(url);
  await client.connect();
  try {
    const { rows } = await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${query.sql}`, query.params);
    const [top] = rows[0]['QUERY PLAN'] as { Plan: PlanNode; 'Execution Time': number }[];
    if (!top) throw new Error('no plan');
    const pushesScans: string[] = [];
    const walk = (n: PlanNode) => {
      if (n['Relation Name'] === 'invoice_pushes')
        pushesScans.push(`${n['Node Type']} ${n['Index Name'] ?? ''}`.trim());
      for (const c of n.Plans ?? []) walk(c);
    };
    walk(top.Plan);
    return {
      ms: top['Execution Time'],
      buffers: (top.Plan['Shared Hit Blocks'] ?? 0) + (top.Plan['Shared Read Blocks'] ?? 0),
      pushesScans: [...new Set(pushesScans)],
    };
  } finally {
    await client.end();
  }
}

const [cluster, sandbox] = await Promise.all([startCluster(), startXeroSandbox({ port: 0 })]);
const { log } = captureLog();
const url = await freshDatabase(cluster, 'refresh_bench');
const handle = await openDatabase(url, log);
const db = handle.db;
const box = await testBox();
const deps: RefreshTickDeps = {
  xero: createXeroClient({ ...xeroConfigFor(sandbox), timeoutMs: 10_000 }),
  box,
  owner: 'bench',
  refreshWithinMs: 10 * MINUTE,
  aheadMs: 10 * MINUTE,
  keepAliveMs: KEEP_ALIVE_MS,
  leaseMs: MINUTE,
  batchSize: 50,
  log,
};

const refreshes = () => sandbox.state.statsSnapshot().refreshGrants;
const rowsOf = async <T>(q: ReturnType<typeof sql>) => (await db.execute(q)) as unknown as { rows: T[] };

/** Time passes: the sandbox's clock moves on and every grant's timestamps move back alike. */
async function elapse(ms: number) {
  sandbox.state.clock.advance(ms);
  const by = sql`${`${ms} milliseconds`}::interval`;
  await db.execute(sql`
    UPDATE xero_grants SET refresh_token_issued_at = refresh_token_issued_at - ${by},
      access_expires_at = access_expires_at - ${by}, refresh_retry_at = refresh_retry_at - ${by}`);
}

let steps = 0;
/** One step of `minutes`: the runs one replica would make in it (one a minute), stopping once idle. */
async function step(tick: RefreshTick, minutes: number) {
  await elapse(minutes * MINUTE);
  // elapse() rewrites every grant at each step, which production never does: vacuumed as often as
  // autovacuum would keep up with it, so that the table stays the size production's would be.
  if (++steps % 20 === 0) await db.execute(sql`VACUUM xero_grants`);
  for (let run = 0; run < minutes; run++) {
    const result = await tick(db, deps);
    if (result.failed + result.needsReauth + result.undecryptable > 0)
      throw new Error(`a refresh failed: ${JSON.stringify(result)}`);
    if (result.claimed === 0) break;
  }
}

try {
  progress(`connecting ${GRANTS} grants to the sandbox`);
  for (let i = 0; i < GRANTS; i++) await connectedOrganization(db, box, sandbox, `Idle ${i + 1}`);
  // History the due query must not read: pushed invoices on every connection.
  await db.execute(sql`
    INSERT INTO invoice_pushes (organization_id, connection_id, tenant_id, idempotency_key, request_hash,
                                payload, status, attempts, xero_invoice_id)
    SELECT c.organization_id, c.id, c.tenant_id, 'history-' || c.id || '-' || n, 'bench', '{}'::jsonb, 'pushed', 1,
           gen_random_uuid()::text
    FROM xero_connections c CROSS JOIN generate_series(1, ${Math.ceil(HISTORY / GRANTS)}) AS n`);
  await db.execute(sql`ANALYZE`);

  // Old policy: every grant's access token is kept warm. Start with tokens issued uniformly over the
  // last 20 minutes (the steady state of a refresh every 20 minutes).
  const old = await oldRefreshTick();
  await db.execute(sql`
    UPDATE xero_grants SET access_expires_at = now() + interval '30 minutes' - random() * interval '20 minutes'`);
  progress(`old policy (${OLD_COMMIT}): ${OLD_HOURS} virtual hours, a run a minute`);
  const oldBefore = refreshes();
  const oldStart = Date.now();
  for (let m = 0; m < OLD_HOURS * 60; m++) await step(old, 1);
  const oldCalls = refreshes() - oldBefore;
  const oldPerDay = oldCalls / GRANTS / (OLD_HOURS / 24);
  const oldWallS = (Date.now() - oldStart) / 1000;

  // New policy: idle grants, their access tokens long expired, refresh tokens issued uniformly over the
  // last cadence (grants connected, or last kept alive, on different days).
  await db.execute(sql`
    UPDATE xero_grants SET access_expires_at = now() - interval '1 day',
      refresh_token_issued_at = now() - random() * ${`${KEEP_ALIVE_MS} milliseconds`}::interval`);
  await db.execute(sql`VACUUM ANALYZE xero_grants`);
  const idleRuns: number[] = [];
  for (let i = 0; i < 21; i++) {
    const t = performance.now();
    const r = await refreshExpiringTokens(db, { ...deps, keepAliveMs: 365 * DAY });
    idleRuns.push(performance.now() - t);
    if (r.claimed !== 0) throw new Error('an idle run claimed a grant');
  }
  idleRuns.sort((a, b) => a - b);
  const idleRunMs = idleRuns[Math.floor(idleRuns.length / 2)] ?? Number.NaN;
  const plan = await explainDueQuery({ ...deps, keepAliveMs: 365 * DAY });

  progress(`new policy: ${DAYS} virtual days in ${STEP_MINUTES}-minute steps`);
  const newBefore = refreshes();
  const newStart = Date.now();
  for (let t = 0; t < DAYS * DAY; t += STEP_MINUTES * MINUTE) {
    await step(refreshExpiringTokens, STEP_MINUTES);
    if ((t + STEP_MINUTES * MINUTE) % (7 * DAY) < STEP_MINUTES * MINUTE)
      progress(
        `day ${Math.round((t + STEP_MINUTES * MINUTE) / DAY)}: ${refreshes() - newBefore} token calls`,
      );
  }
  const newCalls = refreshes() - newBefore;
  const newPerDay = newCalls / GRANTS / DAYS;
  const newWallS = (Date.now() - newStart) / 1000;
  const [alive] = (
    await rowsOf<{ active: number; oldest_days: number }>(sql`
      SELECT count(*) FILTER (WHERE status = 'active')::int AS active,
             extract(epoch FROM now() - min(refresh_token_issued_at)) / 86400 AS oldest_days FROM xero_grants`)
  ).rows;

  console.error(
    table([
      ['policy', 'virtual span', 'token calls', 'per idle grant per day', 'wall s'],
      [`old (${OLD_COMMIT})`, `${OLD_HOURS} h`, String(oldCalls), oldPerDay.toFixed(2), oldWallS.toFixed(1)],
      ['new', `${DAYS} days`, String(newCalls), newPerDay.toFixed(3), newWallS.toFixed(1)],
    ]),
  );
  printResults(
    'refresh',
    {
      grants: GRANTS,
      history_rows: HISTORY,
      days: DAYS,
      step_minutes: STEP_MINUTES,
      old_hours: OLD_HOURS,
      old_commit: OLD_COMMIT,
      keep_alive_days: KEEP_ALIVE_MS / DAY,
      old_calls: oldCalls,
      new_calls: newCalls,
      idle_run_ms_p50: idleRunMs,
      due_query_ms: plan.ms,
      due_query_buffers: plan.buffers,
      due_query_pushes_scans: plan.pushesScans,
      active_at_end: alive?.active,
      oldest_refresh_token_days: Number(alive?.oldest_days),
      loadavg_1m: loadavg()[0],
    },
    {
      refresh_calls_per_idle_grant_day: newPerDay,
      old_refresh_calls_per_idle_grant_day: oldPerDay,
    },
  );
} finally {
  await handle.close();
  await sandbox.close();
  await cluster.remove();
}
