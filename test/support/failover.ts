// Shared pieces of the failover drills (test/failover-*.test.ts) and the failover benchmark: a real
// primary with a real streaming standby behind the TCP fault proxy, an organization to write as, and
// small HTTP helpers that record exactly what a client of the server would see.
import { randomBytes, randomUUID } from 'node:crypto';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { createOrganization } from '../../src/app/organizations.js';
import { type FaultProxy, startFaultProxy } from './fault-proxy.js';
import { type Cluster, startCluster, startStandby, waitForReplay } from './postgres.js';

export type DrillDriver = 'pg' | 'neon-ws' | 'neon-http';

export interface Pair {
  primary: Cluster;
  standby: Cluster;
  /** Starts pointed at the primary. */
  proxy: FaultProxy;
  /** A fresh database on the primary, already replayed on the standby; returns its name. */
  freshDatabase(prefix?: string): Promise<string>;
  /** `postgres://postgres@127.0.0.1:<proxy>/<database>`: what the server is given. */
  proxyUrl(database: string): string;
  remove(): Promise<void>;
}

let databases = 0;

export async function startPair(): Promise<Pair> {
  const primary = await startCluster();
  let standby: Cluster | undefined;
  let proxy: FaultProxy | undefined;
  try {
    standby = await startStandby(primary);
    proxy = await startFaultProxy(primary.port);
  } catch (error) {
    await standby?.remove();
    await primary.remove();
    throw error;
  }
  const pair: Pair = {
    primary,
    standby,
    proxy,
    async freshDatabase(prefix = 'failover') {
      databases += 1;
      const name = `${prefix}_${process.pid}_${databases}`;
      await primary.query(`CREATE DATABASE ${name}`);
      await waitForReplay(primary, pair.standby);
      return name;
    },
    proxyUrl: (database) => `postgres://postgres@127.0.0.1:${pair.proxy.port}/${database}`,
    async remove() {
      await pair.proxy.close();
      await Promise.all([pair.standby.remove(), pair.primary.remove()]);
    },
  };
  return pair;
}

/** Runs `fn` with a short-lived superuser client on `database` of `cluster`. */
export async function withDatabase<T>(
  cluster: Cluster,
  database: string,
  fn: (client: pg.Client) => Promise<T>,
): Promise<T> {
  const client = new pg.Client({ connectionString: cluster.url(database), connectionTimeoutMillis: 10_000 });
  client.on('error', () => {});
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

export interface Org {
  id: string;
  name: string;
  apiKey: string;
}

/** Creates an organization directly in SQL (after the server has migrated the database). */
export function createOrg(cluster: Cluster, database: string, name = 'Failover Drill Ltd'): Promise<Org> {
  return withDatabase(cluster, database, (client) => createOrganization(drizzle({ client }), name));
}

/** Invoice pushes stored under `keys` (all of them when omitted). */
export async function pushCount(cluster: Cluster, database: string, keys?: string[]): Promise<number> {
  const { rows } = await withDatabase(cluster, database, (client) =>
    keys === undefined
      ? client.query<{ n: string }>('SELECT count(*) AS n FROM invoice_pushes')
      : client.query<{ n: string }>(
          'SELECT count(*) AS n FROM invoice_pushes WHERE idempotency_key = ANY($1::text[])',
          [keys],
        ),
  );
  return Number(rows[0]?.n ?? 0);
}

export interface Backend {
  pid: number;
  application_name: string;
  /** Seconds since the backend started (the connection's age). */
  age_s: number;
  state: string | null;
}

/** Client backends connected to `database` on `cluster` (the harness's own connection excluded). */
export async function backends(
  cluster: Cluster,
  database: string,
  applicationName?: string,
): Promise<Backend[]> {
  const { rows } = await cluster.query<Backend>(
    `SELECT pid, application_name, extract(epoch FROM clock_timestamp() - backend_start)::float8 AS age_s, state
       FROM pg_stat_activity
      WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()
        AND ($2::text IS NULL OR application_name = $2)`,
    [database, applicationName ?? null],
  );
  return rows;
}

/** Terminates every client backend on `database`: pooled sessions die, the next ones start afresh. */
export async function terminateBackends(cluster: Cluster, database: string): Promise<void> {
  await cluster.query(
    `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
      WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
    [database],
  );
}

interface HasUrl {
  readonly url: string;
}

export interface Readyz {
  status: number;
  database: string | undefined;
  boot: string | undefined;
  reason: string | undefined;
  ms: number;
}

export async function readyz(server: HasUrl, timeoutMs = 10_000): Promise<Readyz> {
  const started = performance.now();
  const res = await fetch(`${server.url}/readyz?verbose`, { signal: AbortSignal.timeout(timeoutMs) });
  const body = (await res.json()) as {
    checks?: { boot?: string; database?: string };
    details?: { database?: { reason?: string } };
  };
  return {
    status: res.status,
    boot: body.checks?.boot,
    database: body.checks?.database,
    reason: body.details?.database?.reason,
    ms: performance.now() - started,
  };
}

export interface WriteOutcome {
  key: string;
  status: number;
  retryAfter: string | null;
  /** The error code of a JSON error body (`database_unavailable`, ...). */
  code: string | undefined;
  /** The push's id, when the answer was one (202 or 200). */
  id?: string;
}

const INVOICE = JSON.stringify({
  contact: { name: 'Failover Drill Customer' },
  lineItems: [{ description: 'failover drill', quantity: '1', unitAmount: '10.00' }],
  date: '2026-01-15',
  currency: 'NZD',
});

/** One `POST /api/invoices` with a fresh Idempotency-Key (unless given). Status 0: no HTTP answer. */
export async function postInvoice(
  server: HasUrl,
  apiKey: string,
  key: string = randomUUID(),
  timeoutMs = 15_000,
): Promise<WriteOutcome> {
  try {
    const res = await fetch(`${server.url}/api/invoices`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${apiKey}`,
        'idempotency-key': key,
        'content-type': 'application/json',
      },
      body: INVOICE,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = (await res.json().catch(() => undefined)) as
      | { id?: string; error?: { code?: string } }
      | undefined;
    return {
      key,
      status: res.status,
      retryAfter: res.headers.get('retry-after'),
      code: body?.error?.code,
      id: body?.id,
    };
  } catch {
    return { key, status: 0, retryAfter: null, code: undefined };
  }
}

/** `GET /api/invoices`: a read, which a read-only node answers happily (the incident's blind spot). */
export async function listInvoices(server: HasUrl, apiKey: string): Promise<number> {
  const res = await fetch(`${server.url}/api/invoices?limit=1`, {
    headers: { authorization: `Bearer ${apiKey}` },
    signal: AbortSignal.timeout(15_000),
  });
  await res.arrayBuffer();
  return res.status;
}

export const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

/** Polls `fn` every `intervalMs` until `ok` holds or the time is up; returns the last value either way. */
export async function until<T>(
  fn: () => Promise<T>,
  ok: (value: T) => boolean,
  timeoutMs = 15_000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (ok(value) || Date.now() > deadline) return value;
    await sleep(intervalMs);
  }
}

export interface Timed<T> {
  /** performance.now() when the call was made and when it settled. */
  sentAt: number;
  doneAt: number;
  value: T;
}

export interface Ticker<T> {
  /** Settled calls so far, in the order they settled (sorted by sentAt once stopped). */
  readonly results: Timed<T>[];
  /** Stops firing and waits for the calls in flight. */
  stop(): Promise<Timed<T>[]>;
}

/**
 * Calls `fn` every `everyMs` at a fixed rate (a slow answer does not delay the next call), the way a
 * steady client or an orchestrator's probe does. `fn` must not reject.
 */
export function ticker<T>(everyMs: number, fn: () => Promise<T>): Ticker<T> {
  const results: Timed<T>[] = [];
  const inFlight = new Set<Promise<void>>();
  const fire = () => {
    const sentAt = performance.now();
    const call = fn().then((value) => {
      results.push({ sentAt, doneAt: performance.now(), value });
    });
    inFlight.add(call);
    void call.finally(() => inFlight.delete(call));
  };
  fire();
  const timer = setInterval(fire, everyMs);
  return {
    results,
    async stop() {
      clearInterval(timer);
      await Promise.allSettled([...inFlight]);
      results.sort((a, b) => a.sentAt - b.sentAt);
      return results;
    },
  };
}

/** `readyz()` that never rejects: no answer at all is status 0. */
export async function readyzOrNothing(server: HasUrl, timeoutMs = 5000): Promise<Readyz> {
  const started = performance.now();
  try {
    return await readyz(server, timeoutMs);
  } catch {
    return {
      status: 0,
      boot: undefined,
      database: undefined,
      reason: undefined,
      ms: performance.now() - started,
    };
  }
}

/**
 * Liveness as an orchestrator acts on it: any answer but 200 is a failure, and so are
 * `missesInARow` unanswered probes in a row (Kubernetes' default failureThreshold is 3). A single
 * unanswered probe is what a CPU-starved 2-core machine produces now and then, not a dead process.
 */
export function livenessFailures(statuses: number[], missesInARow = 3): string[] {
  const failures: string[] = [];
  let run = 0;
  statuses.forEach((status, i) => {
    if (status !== 0 && status !== 200) failures.push(`probe ${i}: ${status}`);
    run = status === 0 ? run + 1 : 0;
    if (run === missesInARow) failures.push(`probes ${i - run + 1}..${i}: no answer`);
  });
  if (statuses.length === 0) failures.push('no liveness probes ran');
  return failures;
}

export interface LivenessWatch {
  /** Stops polling; resolves with every status seen (0 for no answer). */
  stop(): Promise<number[]>;
}

/**
 * Polls `/livez` every `intervalMs` in the background for the length of a drill (status 0: no answer
 * within `timeoutMs`). Judge the result with livenessFailures().
 */
export function watchLiveness(server: HasUrl, intervalMs = 100, timeoutMs = 5000): LivenessWatch {
  const statuses: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        // Generous: the machine may be busy; a live process answers /livez in well under a second.
        const res = await fetch(`${server.url}/livez`, { signal: AbortSignal.timeout(timeoutMs) });
        await res.arrayBuffer();
        statuses.push(res.status);
      } catch {
        statuses.push(0);
      }
      await sleep(intervalMs);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return statuses;
    },
  };
}

/** Servers on a real database need an operator's key for the tokens they store (32 bytes, base64). */
export const TOKEN_ENCRYPTION_KEY = randomBytes(32).toString('base64');

/**
 * The server's environment for a drill. With a Neon driver the server talks to the local Neon proxy,
 * whose upstream is the fault proxy; the host in DATABASE_URL is then only a label (the Neon proxy
 * ignores it and dials its configured upstream).
 */
export function serverEnv(
  driver: DrillDriver,
  url: string,
  extra: Record<string, string> = {},
  neonProxyUrl?: string,
): Record<string, string> {
  const env: Record<string, string> = {
    DATABASE_URL: url,
    DATABASE_DRIVER: driver,
    API_KEY_REFRESH_MS: '200',
    POOL_MAX: '4',
    TOKEN_ENCRYPTION_KEY,
    ...extra,
  };
  if (driver !== 'pg') {
    if (neonProxyUrl === undefined) throw new Error(`${driver} needs the local Neon proxy`);
    env.NEON_LOCAL_PROXY = neonProxyUrl;
  }
  return env;
}

export interface TrafficSubject extends HasUrl {
  apiKey: string;
}

export interface TrafficOptions {
  /** Traffic before T0 (everything must succeed here). */
  warmupMs: number;
  /**
   * T0 -> T1: every connection leads to the read-only standby. With `waitForReadOnlyMs`, T1 comes
   * `pinnedMs` after every subject's /readyz has answered read_only (or that wait has timed out).
   */
  pinnedMs: number;
  waitForReadOnlyMs?: number;
  /**
   * Just before T1, this many concurrent reads per subject (GET /api/invoices, which a standby
   * answers): they fill the application pool with connections to the standby, so that at T1 the pool
   * really is pinned, as a busy server's would be.
   */
  readBurstBeforeT1?: number;
  /** Pause between the read burst and T1, so that its backlog does not land on the figures after T1. */
  settleAfterBurstMs?: number;
  /** Runs after the read burst, right before T1 (e.g. to count the pinned connections). */
  beforeT1?: () => Promise<void>;
  /** After T1: new connections reach the primary, pooled ones are still on the standby. */
  observeMs: number;
  writeEveryMs?: number;
  readyzEveryMs?: number;
  /** Client-side bound on one write, default 5000 ms (a stranded request is reported as status 0). */
  writeTimeoutMs?: number;
}

export interface TrafficRun {
  t0: number;
  t1: number;
  end: number;
  /** Per subject, in the order given. */
  writes: Timed<WriteOutcome>[][];
  probes: Timed<Readyz>[][];
}

/**
 * Drill (a) under traffic: each subject gets a steady writer (one POST per `writeEveryMs`, fresh
 * Idempotency-Key) and an orchestrator polling /readyz while the proxy pins every connection to the
 * standby at T0 and sends new connections to the primary again at T1. Stages and records; the caller
 * judges.
 */
export async function pinnedUnderTraffic(
  pair: Pair,
  subjects: TrafficSubject[],
  options: TrafficOptions,
): Promise<TrafficRun> {
  const { writeEveryMs = 50, readyzEveryMs = 100, writeTimeoutMs = 5000 } = options;
  const writers = subjects.map((s) =>
    ticker(writeEveryMs, () => postInvoice(s, s.apiKey, undefined, writeTimeoutMs)),
  );
  const probers = subjects.map((s) => ticker(readyzEveryMs, () => readyzOrNothing(s)));
  let t0 = Number.NaN;
  let t1 = Number.NaN;
  let end = Number.NaN;
  try {
    await sleep(options.warmupMs);
    t0 = performance.now();
    pair.proxy.setTarget(pair.standby.port);
    pair.proxy.dropAll();
    if (options.waitForReadOnlyMs !== undefined) {
      const seen = () =>
        probers.every((p) => p.results.some((r) => r.sentAt >= t0 && r.value.database === 'read_only'));
      const deadline = t0 + options.waitForReadOnlyMs;
      while (!seen() && performance.now() < deadline) await sleep(50);
    }
    await sleep(options.pinnedMs);
    const burst = options.readBurstBeforeT1 ?? 0;
    await Promise.all(
      subjects.flatMap((s) => Array.from({ length: burst }, () => listInvoices(s, s.apiKey).catch(() => 0))),
    );
    await sleep(options.settleAfterBurstMs ?? 0);
    await options.beforeT1?.();
    t1 = performance.now();
    pair.proxy.setTarget(pair.primary.port);
    await sleep(options.observeMs);
    end = performance.now();
  } finally {
    await Promise.all([...writers, ...probers].map((t) => t.stop()));
  }
  return { t0, t1, end, writes: writers.map((w) => w.results), probes: probers.map((p) => p.results) };
}

const storedStatus = (status: number) => status === 202 || status === 200;

/**
 * What went wrong for subject `i` of a traffic run, one line per problem (empty: it survived). A write
 * must be stored (202, or 200 when a retry found its own earlier insert) or told to retry shortly
 * (503 + Retry-After: 1); nothing answered before T0 may fail; from `recoveryMs` after T1 every write must be
 * stored and /readyz never read_only; /readyz must have said read_only while pinned and 200 after T1.
 */
export function trafficViolations(run: TrafficRun, i: number, recoveryMs: number): string[] {
  const writes = run.writes[i] ?? [];
  const probes = run.probes[i] ?? [];
  const problems: string[] = [];
  const when = (t: number) =>
    t < run.t0
      ? `${Math.round(run.t0 - t)} ms before T0`
      : t < run.t1
        ? `${Math.round(t - run.t0)} ms after T0`
        : `${Math.round(t - run.t1)} ms after T1`;
  for (const w of writes) {
    const { status, retryAfter, code } = w.value;
    if (storedStatus(status)) continue;
    const answer = `${status === 0 ? 'no answer' : status}${code ? ` ${code}` : ''} after ${Math.round(w.doneAt - w.sentAt)} ms`;
    const retryShortly = status === 503 && retryAfter === '1' && code === 'database_unavailable';
    if (!retryShortly) problems.push(`write sent ${when(w.sentAt)}: ${answer}`);
    // A write still in flight at T0 lives through the failover: it may be told to retry.
    else if (w.doneAt < run.t0) problems.push(`warm-up write sent ${when(w.sentAt)}: ${answer}`);
    else if (w.sentAt >= run.t1 + recoveryMs)
      problems.push(`write sent ${when(w.sentAt)} (recovered?): ${answer}`);
  }
  if (!writes.some((w) => w.sentAt < run.t0)) problems.push('no writes before T0');
  if (!writes.some((w) => w.sentAt >= run.t1 && storedStatus(w.value.status)))
    problems.push('no write stored after T1');
  if (!probes.some((p) => p.sentAt >= run.t0 && p.sentAt < run.t1 && p.value.database === 'read_only')) {
    problems.push('/readyz never answered read_only while pinned');
  }
  if (!probes.some((p) => p.sentAt >= run.t1 && p.value.status === 200))
    problems.push('/readyz never 200 after T1');
  // Like the writes: from `recoveryMs` after T1 nothing reaches the standby any more. (With neon-http
  // the probe shares the Neon proxy's pool, whose pinned connections go one failed query at a time.)
  for (const p of probes) {
    if (p.sentAt >= run.t1 + recoveryMs && p.value.database === 'read_only') {
      problems.push(`/readyz sent ${when(p.sentAt)}: still read_only`);
    }
  }
  return problems;
}

/** Idempotency keys of the writes of subject `i` that the server reported stored. */
export function storedKeys(run: TrafficRun, i: number): string[] {
  return (run.writes[i] ?? []).filter((w) => storedStatus(w.value.status)).map((w) => w.value.key);
}
