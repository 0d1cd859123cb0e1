// Xero budget benchmark: 3 server processes drain one backlog against the Xero sandbox,
// which enforces Xero's limits (5 in flight, 60 a rolling minute and 5,000 a day per tenant, 10,000 a
// minute per app). The minute is shortened for the run on both sides alike (the sandbox's minuteMs,
// the server's XERO_BUDGET_TEST_MINUTE_MS); Xero's counts are not changed. Run twice, side by side:
//   shared      — this tree: the budget in Postgres, taken by the claim statement;
//   per-process — today's per-process limiter (the tree at BENCH_OLD_COMMIT, the last commit before the
//                 shared budget, with its limiter's 60 s window shortened to the same minute).
// Reports utilisation (calls Xero accepted per tenant-minute ÷ the 60 allowed, over the full minutes
// while the tenant had a backlog), 429s by problem, duplicates (invoices Xero holds beyond one per
// push) and idempotent replays, and the drain time. Last line: `result: utilisation=... rate_limited=...
// duplicates=... drain_s=... app_utilisation=...` for the shared budget. With BENCH_TENANTS=10000 (and
// BENCH_MINUTE_MS=60000: Xero's real minute, so that the app's 10,000 a minute is the binding limit) the
// backlog is spread evenly and app_utilisation (calls accepted per full app minute ÷ 10,000) is the figure.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { Database } from '@honest-health/platform';
import pg from 'pg';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { freshDatabase } from '../test/support/databases.js';
import { startCluster } from '../test/support/postgres.js';
import { repoRoot, type ServerProcess, spawnServer, TEST_TOKEN_KEY } from '../test/support/server.js';
import {
  captureLog,
  connectedGrant,
  connectedOrganization,
  openDatabase,
  queueBacklog,
  sandboxEnv,
  testBox,
} from '../test/support/ticks.js';
import { intEnv, printResults, progress, table } from './support/report.js';

const PUSHES = intEnv('BENCH_PUSHES', 3000);
const TENANTS = intEnv('BENCH_TENANTS', 20);
const MINUTE_MS = intEnv('BENCH_MINUTE_MS', 5000);
/** A run that has not drained by then stops and reports what it pushed (the per-process limiter is slow). */
const MAX_RUN_S = intEnv('BENCH_MAX_RUN_S', 120);
const MODES = (process.env.BENCH_MODES ?? 'shared,per-process').split(',');
const SERVERS = intEnv('BENCH_SERVERS', 3);
const LATENCY_MS = intEnv('BENCH_XERO_LATENCY_MS', 20);
const BATCH = intEnv('BENCH_PUSH_BATCH_SIZE', 100);
const OLD_COMMIT = process.env.BENCH_OLD_COMMIT ?? 'dc374e5';
/** `skewed` (default): 60% of the backlog in 2 tenants. `even`: the same over every tenant. */
const SPREAD = process.env.BENCH_SPREAD ?? (TENANTS > 100 ? 'even' : 'skewed');
/** Tenants per grant (one organization each): a fleet of 10,000 tenants is not 10,000 consents. */
const TENANTS_PER_GRANT = intEnv('BENCH_TENANTS_PER_GRANT', TENANTS > 100 ? 100 : 1);
const PER_MINUTE = 60;
const APP_PER_MINUTE = 10_000;

/** Pushes per tenant: 60% of the backlog in the first 2 tenants and the rest spread over the others, or even. */
function backlog(): number[] {
  if (SPREAD === 'even')
    return Array.from(
      { length: TENANTS },
      (_, i) => Math.floor(PUSHES / TENANTS) + (i < PUSHES % TENANTS ? 1 : 0),
    );
  const big = Math.round((PUSHES * 0.6) / 2);
  const rest = PUSHES - 2 * big;
  const small = TENANTS - 2;
  return Array.from({ length: TENANTS }, (_, i) =>
    i < 2 ? big : Math.floor(rest / small) + (i - 2 < rest % small ? 1 : 0),
  );
}

/** The old tree, built once: git archive of OLD_COMMIT, its limiter's window shortened, node_modules shared. */
function oldServerEntry(): string {
  const dir = join(repoRoot, 'node_modules/.cache/xero-budget-old', OLD_COMMIT);
  const entry = join(dir, 'dist/node.js');
  if (existsSync(entry)) return entry;
  progress(`building the per-process limiter's tree (${OLD_COMMIT}) in ${dir}`);
  mkdirSync(dir, { recursive: true });
  execFileSync('sh', ['-c', `git -C "${repoRoot}" archive ${OLD_COMMIT} | tar -x -C "${dir}"`]);
  const limiter = join(dir, 'src/app/xero/tenant-limiter.ts');
  execFileSync('sed', [
    '-i',
    's/^const WINDOW_MS = 60_000;/const WINDOW_MS = Number(process.env.XERO_BUDGET_TEST_MINUTE_MS ?? 60_000);/',
    limiter,
  ]);
  symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'));
  execFileSync(process.execPath, ['tools/build.mjs'], { cwd: dir, stdio: 'ignore' });
  return entry;
}

interface RunFigures {
  mode: string;
  drain_s: number;
  small_tenants_drain_s: number;
  utilisation: number;
  utilisation_min: number;
  utilisation_by_tenant: number[];
  /** Calls Xero accepted across the app per full minute ÷ 10,000, and the minutes counted. */
  app_utilisation: number;
  app_utilisation_min: number;
  app_minutes: number;
  app_utilisation_by_minute: number[];
  rate_limited: number;
  rate_limited_by_problem: Record<string, number>;
  duplicates: number;
  idempotent_replays: number;
  pushed: number;
}

async function run(mode: 'shared' | 'per-process', entry: string): Promise<RunFigures> {
  const cluster = await startCluster();
  const sandbox = await startXeroSandbox({ port: 0, limits: { minuteMs: MINUTE_MS, latencyMs: LATENCY_MS } });
  // Every call Xero accepted, per tenant, on the sandbox's clock.
  const accepted = new Map<string, number[]>();
  const acquire = sandbox.state.limiter.acquire.bind(sandbox.state.limiter);
  sandbox.state.limiter.acquire = (tenantId, now) => {
    const admission = acquire(tenantId, now);
    if (admission.ok) {
      const calls = accepted.get(tenantId) ?? [];
      calls.push(now);
      accepted.set(tenantId, calls);
    }
    return admission;
  };
  const servers: ServerProcess[] = [];
  const client = new pg.Client();
  try {
    const url = await freshDatabase(cluster);
    const { log } = captureLog();
    const handle = await openDatabase(url, log);
    const box = await testBox();
    const sizes = backlog();
    const tenants: string[] = [];
    if (TENANTS_PER_GRANT === 1) {
      for (const [i, n] of sizes.entries()) {
        const { org, tenantId, connectionId } = await connectedOrganization(
          handle.db,
          box,
          sandbox,
          `Bench Co ${i}`,
        );
        tenants.push(tenantId);
        await queueBacklog(handle.db, org.id, connectionId, n, 'bench');
      }
    } else {
      for (let from = 0; from < TENANTS; from += TENANTS_PER_GRANT) {
        const n = Math.min(TENANTS_PER_GRANT, TENANTS - from);
        const grant = await connectedGrant(handle.db, box, sandbox, `Bench Co ${from}`, n);
        tenants.push(...grant.tenantIds);
        const each = grant.connectionIds.map((id, i) => [id, sizes[from + i] ?? 0] as const);
        await queueBacklogs(handle.db, grant.org.id, each);
      }
      progress(`${TENANTS} tenants connected, ${PUSHES} pushes queued`);
    }
    await handle.close();
    const db = new pg.Client(url);
    await db.connect();
    const started = sandbox.state.clock.now();
    progress(
      `${mode}: ${SERVERS} servers drain ${PUSHES} pushes over ${TENANTS} tenants (minute ${MINUTE_MS} ms)`,
    );
    for (let i = 0; i < SERVERS; i++) {
      servers.push(
        await spawnServer({
          args: ['--enable-source-maps', entry],
          command: process.execPath,
          env: {
            DATABASE_URL: url,
            TOKEN_ENCRYPTION_KEY: TEST_TOKEN_KEY,
            ...sandboxEnv(sandbox),
            TICK_INTERVAL_MS: '100',
            PUSH_BATCH_SIZE: String(BATCH),
            XERO_BUDGET_TEST_MINUTE_MS: String(MINUTE_MS),
            LOG_LEVEL: 'info',
          },
        }),
      );
    }
    const smallTenants = new Set(tenants.slice(2));
    let smallDone: number | null = null;
    const deadline = Date.now() + MAX_RUN_S * 1000;
    for (;;) {
      const created = sandbox.state.statsSnapshot().invoicesCreated;
      if (smallDone === null && [...smallTenants].every((t, i) => (created[t] ?? 0) >= (sizes[i + 2] ?? 0)))
        smallDone = sandbox.state.clock.now();
      const { rows } = await db.query(
        `SELECT count(*)::int AS n FROM invoice_pushes WHERE status = 'pushed'`,
      );
      if (rows[0].n >= PUSHES || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const finished = sandbox.state.clock.now();
    // The servers log one line per tick that claimed something (LOG_LEVEL info).
    const ticks = servers.flatMap((s) => s.logs.filter((l) => l.msg === 'push tick done'));
    const sum = (k: string) => ticks.reduce((a, l) => a + Number((l as Record<string, unknown>)[k] ?? 0), 0);
    progress(
      `${mode}: ${ticks.length} ticks claimed ${sum('claimed')}, pushed ${sum('pushed')}, deferred ${sum('deferred')}, retrying ${sum('retrying')}`,
    );
    const warnings = servers.flatMap((s) => s.logs.filter((l) => l.level !== 'info' && l.level !== 'debug'));
    for (const w of warnings.slice(0, 5)) progress(`${mode} server: ${JSON.stringify(w).slice(0, 300)}`);
    await Promise.all(servers.splice(0).map((s) => s.stop()));
    const { rows } = await db.query(`SELECT count(*)::int AS n FROM invoice_pushes WHERE status = 'pushed'`);
    await db.end();

    // Utilisation: over each tenant's full minutes (from its first accepted call) before its last
    // accepted call, the calls accepted in that minute ÷ 60. The last, partial minute is left out.
    const ratios: number[] = [];
    const byTenant: number[] = [];
    for (const tenant of tenants) {
      const before = ratios.length;
      const calls = (accepted.get(tenant) ?? []).sort((a, b) => a - b);
      const first = calls[0];
      const last = calls[calls.length - 1];
      if (first === undefined || last === undefined) continue;
      for (let from = first; from + MINUTE_MS <= last; from += MINUTE_MS) {
        const n = calls.filter((t) => t >= from && t < from + MINUTE_MS).length;
        ratios.push(n / PER_MINUTE);
      }
      const mine = ratios.slice(before);
      byTenant.push(mine.length ? mine.reduce((a, b) => a + b, 0) / mine.length : Number.NaN);
    }
    // The app's minute: every accepted call, per full minute from the first to the last.
    const all = [...accepted.values()].flat().sort((a, b) => a - b);
    const appRatios: number[] = [];
    const firstCall = all[0];
    const lastCall = all[all.length - 1];
    if (firstCall !== undefined && lastCall !== undefined) {
      let i = 0;
      for (let from = firstCall; from + MINUTE_MS <= lastCall; from += MINUTE_MS) {
        let n = 0;
        while (i < all.length && (all[i] as number) < from + MINUTE_MS) {
          n += 1;
          i += 1;
        }
        appRatios.push(n / APP_PER_MINUTE);
      }
    }
    const stats = sandbox.state.statsSnapshot();
    const createdTotal = Object.values(stats.invoicesCreated).reduce((a, b) => a + b, 0);
    return {
      mode,
      drain_s: rows[0].n >= PUSHES ? (finished - started) / 1000 : Number.NaN,
      utilisation_by_tenant: TENANTS > 100 ? [] : byTenant.map((u) => Math.round(u * 1000) / 1000),
      small_tenants_drain_s: smallDone === null ? Number.NaN : (smallDone - started) / 1000,
      utilisation: ratios.length ? ratios.reduce((a, b) => a + b, 0) / ratios.length : Number.NaN,
      utilisation_min: ratios.length ? ratios.reduce((a, b) => Math.min(a, b), 1) : Number.NaN,
      app_utilisation: appRatios.length
        ? appRatios.reduce((a, b) => a + b, 0) / appRatios.length
        : Number.NaN,
      app_utilisation_min: appRatios.length ? Math.min(...appRatios) : Number.NaN,
      app_minutes: appRatios.length,
      app_utilisation_by_minute: appRatios.map((u) => Math.round(u * 1000) / 1000),
      rate_limited: stats.rateLimited,
      rate_limited_by_problem: { ...stats.rateLimitedByProblem },
      duplicates: createdTotal - rows[0].n,
      idempotent_replays: stats.idempotentReplays,
      pushed: rows[0].n,
    };
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    await client.end().catch(() => {});
    await sandbox.close();
    await cluster.remove();
  }
}

execFileSync(process.execPath, ['tools/build.mjs'], { cwd: repoRoot, stdio: 'ignore' });
const runs: RunFigures[] = [];
if (MODES.includes('shared')) runs.push(await run('shared', join(repoRoot, 'dist/node.js')));
if (MODES.includes('per-process')) runs.push(await run('per-process', oldServerEntry()));
const shared = runs.find((r) => r.mode === 'shared');
const old = runs.find((r) => r.mode === 'per-process');

const f = (n: number) => (Number.isFinite(n) ? n.toFixed(3) : 'nan');
console.log(
  table([
    [
      'mode',
      'pushed',
      'drain_s',
      'small_drain_s',
      'utilisation',
      'util_min',
      'app_util',
      'app_util_min',
      '429s',
      'minute/concurrent/day/app',
      'dup',
      'replays',
    ],
    ...runs.map((r) => [
      r.mode,
      String(r.pushed),
      f(r.drain_s),
      f(r.small_tenants_drain_s),
      f(r.utilisation),
      f(r.utilisation_min),
      f(r.app_utilisation),
      f(r.app_utilisation_min),
      String(r.rate_limited),
      ['minute', 'concurrent', 'day', 'appminute'].map((p) => r.rate_limited_by_problem[p] ?? 0).join('/'),
      String(r.duplicates),
      String(r.idempotent_replays),
    ]),
  ]),
);
printResults(
  'xero-budget',
  {
    pushes: PUSHES,
    tenants: TENANTS,
    servers: SERVERS,
    minute_ms: MINUTE_MS,
    latency_ms: LATENCY_MS,
    shared,
    per_process: old,
  },
  {
    utilisation: shared?.utilisation,
    rate_limited: shared?.rate_limited,
    duplicates: shared?.duplicates,
    drain_s: shared?.drain_s,
    app_utilisation: shared?.app_utilisation,
    app_minutes: shared?.app_minutes,
    old_utilisation: old?.utilisation,
    old_rate_limited: old?.rate_limited,
    old_duplicates: old?.duplicates,
    old_drain_s: old?.drain_s,
  },
);

/** Each connection's backlog, in one INSERT per grant (queueBacklog's rows). */
async function queueBacklogs(
  db: Database,
  organizationId: string,
  each: readonly (readonly [string, number])[],
) {
  const { sql } = await import('drizzle-orm');
  await db.execute(sql`
    INSERT INTO invoice_pushes (organization_id, connection_id, idempotency_key, request_hash, payload, status)
    SELECT ${organizationId}, v.id, 'bench-' || v.id || '-' || n, 'test',
           jsonb_build_object('contact', jsonb_build_object('name', 'Customer ' || n),
                              'lineItems', jsonb_build_array(jsonb_build_object('description', 'Item', 'quantity', '1', 'unitAmount', '1.00')),
                              'date', '2026-11-29', 'currency', 'NZD'),
           'queued'
    FROM unnest(${sql.param(each.map(([id]) => id))}::uuid[], ${sql.param(each.map(([, n]) => n))}::int[]) AS v(id, k)
      CROSS JOIN LATERAL generate_series(1, v.k) AS n`);
}
