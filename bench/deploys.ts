// Deploy drills: two releases on one database while POST /api/invoices streams into the serving one.
// The "newer releases" are real builds: a scratch `git worktree` of this commit (node_modules
// hard-linked, so its workspace symlinks point inside the copy), a change to src/app/schema.ts,
// `npm run db:generate` and `npm run build` there, as a user makes one.
//   (a) a newer release adds a nullable column to invoice_pushes at boot while a reader holds
//       `BEGIN; SELECT count(*) FROM invoice_pushes` for BENCH_READER_S (20) s; twice: with the default
//       MIGRATION_LOCK_ATTEMPT_MS, and with it at its maximum (60 s, longer than the reader: a lock wait
//       with no timeout, the migrator before lock_timeout);
//   (b) a newer release adds an index for status-filtered lists on invoice_pushes holding
//       BENCH_HISTORY_ROWS (2,000,000) settled rows; db:generate makes it CONCURRENTLY. Side by side, the
//       same index as a plain CREATE INDEX in a transaction (what the migrator ran before);
//   (c) the previous release (commit f1bfa43, built in a scratch worktree) boots on the schema this
//       release migrated, takes invoices and pushes them to the Xero sandbox, with no error line;
//   (d) `npm run db:migrate` of a contract (the column of (a) dropped, made by db:generate) is refused
//       while the release of (a), which needs that column, is recorded as seen, and applies with
//       `--allow-contract`.
// It reports figures and marks missed targets; it never fails on them (tests assert, benchmarks report).
// Run: `npm run bench:deploys` (it builds first: the serving release is dist/node.js). Knobs: BENCH_READER_S, BENCH_HISTORY_ROWS, BENCH_CLIENTS (4),
// BENCH_PREVIOUS_COMMIT (f1bfa43).
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createLogger } from '@honest-health/platform';
import pg from 'pg';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { freshDatabase } from '../test/support/databases.js';
import { createOrg, waitForKey } from '../test/support/orgs.js';
import { type Cluster, startCluster } from '../test/support/postgres.js';
import { repoRoot, type ServerProcess, spawnServer } from '../test/support/server.js';
import {
  connectedOrganization,
  openDatabase,
  type Sandbox,
  sandboxEnv,
  testBox,
} from '../test/support/ticks.js';
import { bootToReady, serverDump, stopServer, trackServer } from './support/boot.js';
import { INVOICE } from './support/ingress-harness.js';
import { cleanupAll, runBench, tempDir, track } from './support/lifecycle.js';
import { intEnv, missedChecks, printResults, progress, table, verdict } from './support/report.js';
import { percentile, round1 } from './support/stats.js';

const run = promisify(execFile);
const READER_S = intEnv('BENCH_READER_S', 20);
const HISTORY_ROWS = intEnv('BENCH_HISTORY_ROWS', 2_000_000);
// A few clients, each one request at a time: a steady stream, not a saturation test (2 shared cores).
const CLIENTS = intEnv('BENCH_CLIENTS', 4);
const PREVIOUS_COMMIT = process.env.BENCH_PREVIOUS_COMMIT || 'f1bfa43';
// The newer release boots this long after the reader took its lock, and the load runs this long
// before and after each drill.
const LEAD_MS = 1000;
const WARM_MS = 2000;
const TAIL_MS = 3000;
const PREVIOUS_INVOICES = 20;
const TARGET = { slowMs: 2000, readyAfterReaderMs: 60_000 } as const;
// The index status-filtered lists need (an organization's pushes in one status, newest first).
const INDEX = 'invoice_pushes_org_status_created_idx';
const INDEX_COLUMNS = '"organization_id","status","created_at","id"';

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

// ---------------------------------------------------------------------------------------------------
// Scratch builds

async function sh(cwd: string, command: string, args: string[], env: Record<string, string> = {}) {
  try {
    return await run(command, args, {
      cwd,
      env: { ...process.env, ...env },
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (err) {
    const e = err as Error & { stdout?: string; stderr?: string };
    throw new Error(`${command} ${args.join(' ')} in ${cwd} failed: ${e.message}\n${e.stdout}\n${e.stderr}`);
  }
}

/** A worktree of `commit` with this checkout's node_modules hard-linked in; removed at the end. */
async function scratchCopy(commit: string, prefix: string): Promise<string> {
  const dir = join(tempDir(prefix), 'repo');
  await sh(repoRoot, 'git', ['worktree', 'add', '--detach', dir, commit]);
  track(`worktree ${dir}`, () => sh(repoRoot, 'git', ['worktree', 'remove', '--force', dir]));
  // Relative workspace symlinks (node_modules/@honest-health/*) then resolve inside the copy.
  await sh(repoRoot, 'cp', ['-al', join(repoRoot, 'node_modules'), dir]);
  return dir;
}

function editSchema(dir: string, edit: (source: string) => string): void {
  const file = join(dir, 'src/app/schema.ts');
  const before = readFileSync(file, 'utf8');
  const after = edit(before);
  if (after === before) throw new Error('the schema edit matched nothing');
  writeFileSync(file, after);
}

/** `npm run db:generate`; returns the SQL of the migration it wrote. */
async function generate(dir: string): Promise<{ file: string; sql: string }> {
  const before = new Set(readdirSync(join(dir, 'drizzle')));
  await sh(dir, 'npm', ['run', '-s', 'db:generate']);
  const added = readdirSync(join(dir, 'drizzle')).filter((f) => f.endsWith('.sql') && !before.has(f));
  if (added.length !== 1) throw new Error(`db:generate wrote ${added.join(', ') || 'nothing'}`);
  const file = added[0] as string;
  return { file, sql: readFileSync(join(dir, 'drizzle', file), 'utf8') };
}

/** `npm run build`, the bundle moved to `dist-<name>` so that the copy can build again. */
async function build(dir: string, name: string): Promise<string> {
  await sh(dir, 'npm', ['run', '-s', 'build']);
  renameSync(join(dir, 'dist'), join(dir, `dist-${name}`));
  return join(dir, `dist-${name}`, 'node.js');
}

interface Release {
  name: string;
  cwd: string;
  entry: string;
}

const COLUMN_LINE = "    xeroMarker: text('xero_marker'),\n";
// The line the new index goes after: the last index of invoice_pushes.
const SETTLED_INDEX_LINE = /( *index\('invoice_pushes_settled_idx'\)[^\n]*\n)/;

async function buildReleases() {
  progress('building the newer releases in scratch worktrees (db:generate, build)');
  const columnDir = await scratchCopy('HEAD', 'deploys-column-');
  editSchema(columnDir, (s) => s.replace(COLUMN_LINE, `${COLUMN_LINE}    benchNote: text('bench_note'),\n`));
  const column = await generate(columnDir);
  const columnRelease: Release = {
    name: 'newer+column',
    cwd: columnDir,
    entry: await build(columnDir, 'column'),
  };

  const indexDir = await scratchCopy('HEAD', 'deploys-index-');
  editSchema(indexDir, (s) =>
    s.replace(
      SETTLED_INDEX_LINE,
      `$1    index('${INDEX}').on(t.organizationId, t.status, t.createdAt, t.id),\n`,
    ),
  );
  const index = await generate(indexDir);
  const indexRelease: Release = { name: 'newer+index', cwd: indexDir, entry: await build(indexDir, 'index') };

  progress(`building the previous release (${PREVIOUS_COMMIT})`);
  const previousDir = await scratchCopy(PREVIOUS_COMMIT, 'deploys-previous-');
  await sh(previousDir, 'npm', ['run', '-s', 'build']);
  const previous: Release = { name: 'previous', cwd: previousDir, entry: join(previousDir, 'dist/node.js') };
  const current: Release = { name: 'current', cwd: repoRoot, entry: join(repoRoot, 'dist/node.js') };
  return { current, columnRelease, column, indexRelease, index, previous };
}

function spawnRelease(release: Release, env: Record<string, string>): Promise<ServerProcess> {
  return spawnServer({
    cwd: release.cwd,
    command: process.execPath,
    args: ['--enable-source-maps', release.entry],
    env: { RELEASE_ID: release.name, ...env },
  });
}

// ---------------------------------------------------------------------------------------------------
// Load

interface Sample {
  at: number;
  ms: number;
  status: number;
}

const BODY = JSON.stringify(INVOICE);
let keySeq = 0;

/** CLIENTS loops posting one invoice each at a time until stop(). */
function startLoad(url: string, apiKey: string) {
  const samples: Sample[] = [];
  let running = true;
  const loops = Array.from({ length: CLIENTS }, async () => {
    while (running) {
      const started = performance.now();
      let status = 0;
      try {
        const res = await fetch(`${url}/api/invoices`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            authorization: `Bearer ${apiKey}`,
            'idempotency-key': `drill-${process.pid}-${++keySeq}`,
          },
          body: BODY,
          signal: AbortSignal.timeout(60_000),
        });
        await res.arrayBuffer();
        status = res.status;
      } catch {
        status = 0;
      }
      samples.push({ at: started, ms: performance.now() - started, status });
    }
  });
  return {
    samples,
    async stop() {
      running = false;
      await Promise.all(loops);
      return samples;
    },
  };
}

interface PostFigures {
  posts: number;
  non_202: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
  over_2s: number;
}

function postFigures(samples: readonly Sample[]): PostFigures {
  const ms = samples.map((s) => s.ms);
  return {
    posts: samples.length,
    non_202: samples.filter((s) => s.status !== 202).length,
    p50_ms: round1(percentile(ms, 50)),
    p99_ms: round1(percentile(ms, 99)),
    max_ms: Math.round(Math.max(0, ...ms)),
    over_2s: ms.filter((m) => m > TARGET.slowMs).length,
  };
}

/** The serving release (this build) on a database it migrated, with an organization whose key works. */
async function serving(current: Release, url: string, extra: Record<string, string> = {}) {
  const { server } = await bootToReady({
    cwd: current.cwd,
    env: {
      DATABASE_URL: url,
      LOG_LEVEL: 'warn',
      API_KEY_REFRESH_MS: '100',
      RELEASE_ID: 'current',
      ...extra,
    },
  });
  const org = await createOrg(url, 'Drill Ltd');
  await waitForKey(server, org.apiKey);
  return { server, org };
}

/** Polls /readyz every 100 ms; resolves with the time of the first 200. */
async function readyAt(server: ServerProcess, timeoutMs: number): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  let gone = false;
  void server.exited.then(() => {
    gone = true;
  });
  for (;;) {
    try {
      const res = await fetch(`${server.url}/readyz`, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.status === 200) return performance.now();
    } catch {
      // Not listening yet: the process boot migrates before it binds.
    }
    if (gone || performance.now() > deadline)
      throw new Error(`the newer release was not ready in time\n${serverDump(server)}`);
    await sleep(100);
  }
}

async function client(url: string, name: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url, application_name: name });
  c.on('error', () => {});
  await c.connect();
  return c;
}

const logged = (server: ServerProcess, msg: string) => server.logs.filter((l) => l.msg === msg);
const errorLines = (server: ServerProcess) =>
  server.logs.filter((l) => l.level === 'error' || l.level === 'fatal').length +
  server.output.filter((l) => /\berror\b/i.test(l)).length;

// ---------------------------------------------------------------------------------------------------
// (a) behind a long reader

interface ReaderDrill extends PostFigures {
  ready_after_reader_ms: number;
  lock_waits_logged: number;
  migration_ms: number | null;
}

async function readerDrill(
  cluster: Cluster,
  current: Release,
  newer: Release,
  label: string,
  newerEnv: Record<string, string>,
): Promise<{ figures: ReaderDrill; url: string }> {
  progress(`(a) ${label}: serving release, ${CLIENTS} clients, a ${READER_S} s reader, the newer release`);
  const url = await freshDatabase(cluster, 'deploys_a');
  const { server, org } = await serving(current, url);
  const load = startLoad(server.url, org.apiKey);
  await sleep(WARM_MS);
  const reader = await client(url, 'long-reader');
  await reader.query('BEGIN');
  await reader.query('SELECT count(*) FROM invoice_pushes');
  const readerStarted = performance.now();
  await sleep(LEAD_MS);
  const next = await spawnRelease(newer, { DATABASE_URL: url, LOG_LEVEL: 'info', ...newerEnv });
  trackServer(next);
  const ready = readyAt(next, (READER_S + 120) * 1000);
  ready.catch(() => {});
  await sleep(Math.max(0, readerStarted + READER_S * 1000 - performance.now()));
  await reader.query('COMMIT');
  const readerEnded = performance.now();
  await reader.end();
  const readyTime = await ready;
  await sleep(TAIL_MS);
  const samples = await load.stop();
  const applied = logged(next, 'migration applied').find((l) => String(l.migration).startsWith('0014'));
  const figures: ReaderDrill = {
    ...postFigures(samples),
    ready_after_reader_ms: Math.round(readyTime - readerEnded),
    lock_waits_logged: logged(next, 'migration waits for a lock').length,
    migration_ms: typeof applied?.duration_ms === 'number' ? applied.duration_ms : null,
  };
  const firstWait = logged(next, 'migration waits for a lock')[0];
  if (firstWait) progress(`  the newer release logged: ${JSON.stringify(firstWait).slice(0, 400)}`);
  progress(`  ${JSON.stringify(figures)}`);
  await stopServer(next);
  await stopServer(server);
  return { figures, url };
}

// ---------------------------------------------------------------------------------------------------
// (b) an index at HISTORY_ROWS rows

interface IndexDrill extends PostFigures {
  build_ms: number;
  index_valid: boolean;
}

async function fillHistory(url: string, organizationId: string): Promise<number> {
  const c = await client(url, 'history-fill');
  const started = performance.now();
  try {
    // Settled history: 'pushed', a Xero id, spread over a year, its keys unique per organization.
    await c.query(
      `INSERT INTO invoice_pushes
         (organization_id, idempotency_key, request_hash, payload, status, attempts, xero_invoice_id,
          created_at, updated_at)
       SELECT $1, 'history-' || g, md5(g::text), $2::jsonb, 'pushed', 1, 'xero-' || g,
              now() - make_interval(secs => g * 15), now() - make_interval(secs => g * 15)
         FROM generate_series(1, $3::int) g`,
      [organizationId, BODY, HISTORY_ROWS],
    );
    await c.query('VACUUM (ANALYZE) invoice_pushes');
  } finally {
    await c.end();
  }
  return Math.round(performance.now() - started);
}

async function indexValid(url: string): Promise<boolean> {
  const c = await client(url, 'bench');
  try {
    const { rows } = await c.query<{ valid: boolean }>(
      'SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass($1)',
      [INDEX],
    );
    return rows[0]?.valid === true;
  } finally {
    await c.end();
  }
}

async function indexDrill(cluster: Cluster, current: Release, newer: Release) {
  progress(`(b) serving release on invoice_pushes with ${HISTORY_ROWS} settled rows`);
  const url = await freshDatabase(cluster, 'deploys_b');
  const { server, org } = await serving(current, url);
  const fillMs = await fillHistory(url, org.id);
  progress(`  filled in ${fillMs} ms`);

  progress('(b) the newer release builds the index at boot (db:generate made it CONCURRENTLY)');
  let load = startLoad(server.url, org.apiKey);
  await sleep(WARM_MS);
  const next = await spawnRelease(newer, { DATABASE_URL: url, LOG_LEVEL: 'info' });
  trackServer(next);
  await readyAt(next, 30 * 60_000);
  await sleep(TAIL_MS);
  let samples = await load.stop();
  const applied = logged(next, 'migration applied').find((l) => String(l.migration).startsWith('0014'));
  const concurrently: IndexDrill = {
    ...postFigures(samples),
    build_ms: typeof applied?.duration_ms === 'number' ? applied.duration_ms : Number.NaN,
    index_valid: await indexValid(url),
  };
  progress(`  ${JSON.stringify(concurrently)}`);
  await stopServer(next);

  progress('(b) side by side: the same index as a plain CREATE INDEX in a transaction');
  const c = await client(url, 'plain-index');
  await c.query(`DROP INDEX CONCURRENTLY IF EXISTS "${INDEX}"`);
  await c.query('VACUUM (ANALYZE) invoice_pushes');
  load = startLoad(server.url, org.apiKey);
  await sleep(WARM_MS);
  const started = performance.now();
  await c.query('BEGIN');
  await c.query(`CREATE INDEX "${INDEX}" ON "invoice_pushes" USING btree (${INDEX_COLUMNS})`);
  await c.query('COMMIT');
  const buildMs = Math.round(performance.now() - started);
  await c.end();
  await sleep(TAIL_MS);
  samples = await load.stop();
  const plain: IndexDrill = {
    ...postFigures(samples),
    build_ms: buildMs,
    index_valid: await indexValid(url),
  };
  progress(`  ${JSON.stringify(plain)}`);
  await stopServer(server);
  return { concurrently, plain, fillMs };
}

// ---------------------------------------------------------------------------------------------------
// (c) the previous release on the new schema

async function previousDrill(cluster: Cluster, current: Release, previous: Release, sandbox: Sandbox) {
  progress(`(c) this release migrates, then the previous release (${PREVIOUS_COMMIT}) boots and pushes`);
  const url = await freshDatabase(cluster, 'deploys_c');
  const { server } = await bootToReady({
    cwd: current.cwd,
    env: { DATABASE_URL: url, LOG_LEVEL: 'warn', RELEASE_ID: 'current' },
  });
  await stopServer(server);
  const handle = await openDatabase(url, createLogger('warn'));
  const { org, tenantId } = await connectedOrganization(handle.db, await testBox(), sandbox, 'Previous Co');
  await handle.close();

  const prev = await spawnRelease(previous, {
    DATABASE_URL: url,
    LOG_LEVEL: 'info',
    TICK_INTERVAL_MS: '300',
    API_KEY_REFRESH_MS: '100',
    ...sandboxEnv(sandbox),
  });
  trackServer(prev);
  await readyAt(prev, 60_000);
  await waitForKey(prev, org.apiKey);
  let accepted = 0;
  for (let i = 0; i < PREVIOUS_INVOICES; i++) {
    const res = await prev.get('/api/invoices', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${org.apiKey}`,
        'idempotency-key': `previous-${i}`,
      },
      body: BODY,
    });
    await res.arrayBuffer();
    if (res.status === 202) accepted += 1;
  }
  const c = await client(url, 'bench');
  const deadline = performance.now() + 60_000;
  let pushed = 0;
  while (performance.now() < deadline) {
    const { rows } = await c.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM invoice_pushes WHERE status = 'pushed'",
    );
    pushed = rows[0]?.n ?? 0;
    if (pushed === PREVIOUS_INVOICES) break;
    await sleep(250);
  }
  await c.end();
  await stopServer(prev);
  const figures = {
    accepted,
    pushed,
    sandbox_invoices: sandbox.state.statsSnapshot().invoicesCreated[tenantId] ?? 0,
    error_lines: errorLines(prev),
    warn_lines: prev.logs.filter((l) => l.level === 'warn').length,
  };
  for (const l of prev.logs.filter((l) => l.level !== 'info' && l.level !== 'debug'))
    progress(`  previous release logged: ${JSON.stringify(l).slice(0, 300)}`);
  progress(`  ${JSON.stringify(figures)}`);
  return figures;
}

// ---------------------------------------------------------------------------------------------------
// (d) a contract refused while a release needs what it removes

async function contractDrill(columnRelease: Release, url: string) {
  progress('(d) the column of (a) dropped (db:generate), db:migrate while its release is recorded');
  editSchema(columnRelease.cwd, (s) => s.replace("    benchNote: text('bench_note'),\n", ''));
  const contract = await generate(columnRelease.cwd);
  const migrate = async (args: string[]) => {
    try {
      const { stdout, stderr } = await run('npm', ['run', '-s', 'db:migrate', ...args], {
        cwd: columnRelease.cwd,
        env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'warn' },
      });
      return { code: 0, out: `${stdout}${stderr}` };
    } catch (err) {
      const e = err as { code?: number; stdout?: string; stderr?: string };
      return { code: e.code ?? 1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` };
    }
  };
  const refused = await migrate([]);
  const reason = refused.out.split('\n').find((l) => /refusing contract/.test(l)) ?? refused.out.slice(-300);
  progress(`  without the flag: exit ${refused.code}: ${reason.trim().slice(0, 300)}`);
  const allowed = await migrate(['--', '--allow-contract']);
  progress(`  with --allow-contract: exit ${allowed.code}: ${allowed.out.trim().slice(-300)}`);
  const c = await client(url, 'bench');
  const { rows } = await c.query(
    "SELECT 1 FROM information_schema.columns WHERE table_name = 'invoice_pushes' AND column_name = 'bench_note'",
  );
  await c.end();
  return {
    header: contract.sql.split('\n')[0] ?? '',
    refused_exit: refused.code,
    refused_names_release: /refusing contract migration .*newer\+column/.test(refused.out),
    allowed_exit: allowed.code,
    column_dropped: rows.length === 0,
  };
}

// ---------------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const wallStart = performance.now();
  const loadBefore = loadavg()[0] ?? 0;
  progress(
    `deploy drills: ${CLIENTS} clients, a ${READER_S} s reader, ${HISTORY_ROWS} history rows, ` +
      `${availableParallelism()} cores, 1-min load ${loadBefore.toFixed(1)}`,
  );
  const releases = await buildReleases();
  progress(`newer+column's migration: ${releases.column.file}: ${releases.column.sql.replace(/\n/g, ' ')}`);
  progress(`newer+index's migration: ${releases.index.file}: ${releases.index.sql.replace(/\n/g, ' ')}`);

  const cluster = await startCluster();
  track('cluster', () => cluster.remove());
  const sandbox = await startXeroSandbox({ port: 0 });
  track('sandbox', () => sandbox.close());

  const a = await readerDrill(cluster, releases.current, releases.columnRelease, 'lock_timeout', {});
  const aNoTimeout = await readerDrill(
    cluster,
    releases.current,
    releases.columnRelease,
    'no lock_timeout (MIGRATION_LOCK_ATTEMPT_MS=60000)',
    { MIGRATION_LOCK_ATTEMPT_MS: '60000' },
  );
  const d = await contractDrill(releases.columnRelease, a.url);
  const b = await indexDrill(cluster, releases.current, releases.indexRelease);
  const c = await previousDrill(cluster, releases.current, releases.previous, sandbox);
  await cleanupAll();

  const loadAfter = loadavg()[0] ?? 0;
  const checks = {
    a_all_202: a.figures.non_202 === 0,
    a_none_over_2s: a.figures.over_2s === 0,
    a_ready_within_60s: a.figures.ready_after_reader_ms <= TARGET.readyAfterReaderMs,
    b_all_202: b.concurrently.non_202 === 0,
    b_none_over_2s: b.concurrently.over_2s === 0,
    b_index_valid: b.concurrently.index_valid,
    c_pushed_all: c.pushed === PREVIOUS_INVOICES && c.accepted === PREVIOUS_INVOICES,
    c_no_errors: c.error_lines === 0,
    d_refused: d.refused_exit !== 0 && d.refused_names_release,
    d_allowed: d.allowed_exit === 0 && d.column_dropped,
  };
  const row = (name: string, f: PostFigures, extra: string) => [
    name,
    String(f.posts),
    String(f.non_202),
    f.p50_ms.toFixed(1),
    f.p99_ms.toFixed(1),
    String(f.max_ms),
    String(f.over_2s),
    extra,
  ];
  console.log('');
  console.log(
    `Deploy drills — ${CLIENTS} clients; 1-min load average ${loadBefore.toFixed(1)} at start, ` +
      `${loadAfter.toFixed(1)} at end (${availableParallelism()} cores)`,
  );
  console.log(
    table([
      ['drill', 'POSTs', 'non-202', 'p50 ms', 'p99 ms', 'max ms', '> 2 s', ''],
      row(
        `(a) column behind a ${READER_S} s reader, lock_timeout`,
        a.figures,
        `ready ${a.figures.ready_after_reader_ms} ms after the reader, ${a.figures.lock_waits_logged} lock waits logged`,
      ),
      row(
        '(a) the same, no lock_timeout',
        aNoTimeout.figures,
        `ready ${aNoTimeout.figures.ready_after_reader_ms} ms after the reader`,
      ),
      row(
        `(b) index at ${HISTORY_ROWS} rows, CONCURRENTLY`,
        b.concurrently,
        `built in ${b.concurrently.build_ms} ms, valid ${b.concurrently.index_valid}`,
      ),
      row(
        '(b) the same, plain CREATE INDEX in a transaction',
        b.plain,
        `built in ${b.plain.build_ms} ms, valid ${b.plain.index_valid}`,
      ),
    ]),
  );
  console.log('');
  console.log(
    `(c) previous release ${PREVIOUS_COMMIT} on the new schema: ${c.accepted}/${PREVIOUS_INVOICES} accepted, ` +
      `${c.pushed} pushed (${c.sandbox_invoices} in the sandbox), ${c.error_lines} error lines, ${c.warn_lines} warn lines`,
  );
  console.log(
    `(d) contract (${d.header}): db:migrate exit ${d.refused_exit} naming the release: ${d.refused_names_release}; ` +
      `--allow-contract exit ${d.allowed_exit}, column dropped: ${d.column_dropped}`,
  );
  console.log('');
  console.log(
    table([['check', 'result'], ...Object.entries(checks).map(([name, ok]) => [name, verdict(ok)])]),
  );
  printResults(
    'deploys',
    {
      clients: CLIENTS,
      reader_s: READER_S,
      history_rows: HISTORY_ROWS,
      previous_commit: PREVIOUS_COMMIT,
      a: a.figures,
      a_no_lock_timeout: aNoTimeout.figures,
      b: { concurrently: b.concurrently, plain: b.plain, fill_ms: b.fillMs },
      c,
      d,
      loadavg_1m: { start: loadBefore, end: loadAfter },
      missed: missedChecks(checks),
      wall_s: Math.round((performance.now() - wallStart) / 1000),
    },
    {
      a_posts: a.figures.posts,
      a_non_202: a.figures.non_202,
      a_p50_ms: a.figures.p50_ms,
      a_p99_ms: a.figures.p99_ms,
      a_max_ms: a.figures.max_ms,
      a_over_2s: a.figures.over_2s,
      a_ready_after_reader_ms: a.figures.ready_after_reader_ms,
      a_old_posts: aNoTimeout.figures.posts,
      a_old_non_202: aNoTimeout.figures.non_202,
      a_old_p99_ms: aNoTimeout.figures.p99_ms,
      a_old_max_ms: aNoTimeout.figures.max_ms,
      a_old_over_2s: aNoTimeout.figures.over_2s,
      b_rows: HISTORY_ROWS,
      b_posts: b.concurrently.posts,
      b_non_202: b.concurrently.non_202,
      b_p50_ms: b.concurrently.p50_ms,
      b_p99_ms: b.concurrently.p99_ms,
      b_max_ms: b.concurrently.max_ms,
      b_over_2s: b.concurrently.over_2s,
      b_build_ms: b.concurrently.build_ms,
      b_index_valid: b.concurrently.index_valid ? 1 : 0,
      b_plain_posts: b.plain.posts,
      b_plain_max_ms: b.plain.max_ms,
      b_plain_over_2s: b.plain.over_2s,
      b_plain_build_ms: b.plain.build_ms,
      c_accepted: c.accepted,
      c_pushed: c.pushed,
      c_error_lines: c.error_lines,
      d_refused: checks.d_refused ? 1 : 0,
      d_allowed: checks.d_allowed ? 1 : 0,
      missed: missedChecks(checks).length,
    },
  );
}

await runBench(main);
