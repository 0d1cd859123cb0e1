// A failover is one episode in the logs (one warning when it starts, one summary
// with counts when it ends), pool disposals are damped while the fresh pool is read-only too, and a
// routine failover never logs at level error. Against a real read-only database
// (default_transaction_read_only=on) and a real standby behind the TCP fault proxy.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase } from './support/databases.js';
import { type FaultProxy, startFaultProxy } from './support/fault-proxy.js';
import { createOrg, invoiceBody, waitForKey } from './support/orgs.js';
import { type Cluster, startCluster, startStandby, waitForReplay } from './support/postgres.js';
import { type LogLine, type ServerProcess, spawnServer } from './support/server.js';
import { until } from './support/until.js';

let primary: Cluster;
let standby: Cluster;
let proxy: FaultProxy;
beforeAll(async () => {
  primary = await startCluster();
  standby = await startStandby(primary);
  proxy = await startFaultProxy(primary.port);
});
afterAll(async () => {
  await proxy?.close();
  await standby?.remove();
  await primary?.remove();
});

let keys = 0;
function write(server: ServerProcess, apiKey: string, tag: string) {
  return server.get('/api/invoices', {
    method: 'POST',
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      'idempotency-key': `${tag}-${++keys}`,
    },
    body: JSON.stringify(invoiceBody()),
  });
}

/** Runs `fn` every `everyMs` until `untilMs` (a Date.now() deadline), one call at a time. */
async function every(everyMs: number, untilMs: number, fn: () => Promise<void>): Promise<void> {
  while (Date.now() < untilMs) {
    const started = Date.now();
    await fn();
    await new Promise((r) => setTimeout(r, Math.max(0, everyMs - (Date.now() - started))));
  }
}

const started = (lines: LogLine[]) => lines.filter((l) => / episode started/.test(l.msg));
const disposed = (lines: LogLine[], role: string) =>
  lines.filter((l) => l.msg === 'database pool disposed' && l.role === role);
const warnings = (lines: LogLine[]) =>
  lines.filter((l) => l.level === 'warn' && l.msg !== 'idle database client failed').map((l) => l.msg);
const summaryOf = (l: LogLine) => / episode ended after /.test(l.msg);

/** Polls /readyz until the episode's summary is logged (it needs a write-proving probe). */
async function awaitSummary(server: ServerProcess, mark: number): Promise<LogLine> {
  await until(
    async () => {
      await server.get('/readyz');
      return server.logs.slice(mark).some(summaryOf);
    },
    (seen) => seen,
    20_000,
    200,
  );
  const line = server.logs.slice(mark).find(summaryOf);
  if (!line) throw new Error('no summary');
  return line;
}

describe('a failover episode', () => {
  it('a database that stays read-only: one warning, damped disposals, a summary with counts', async () => {
    const url = await freshDatabase(primary);
    const dbName = new URL(url).pathname.slice(1);
    const server = await spawnServer({ env: { DATABASE_URL: url, API_KEY_REFRESH_MS: '200' } });
    try {
      await server.waitForReady();
      const org = await createOrg(url, 'Read-only Ltd');
      await waitForKey(server, org.apiKey);
      expect((await server.get('/readyz')).status).toBe(200);
      const mark = server.logs.length;

      // A managed primary turning read-only (a full disk): new sessions come up read-only, for good.
      await primary.query(`ALTER DATABASE ${dbName} SET default_transaction_read_only = on`);
      await primary.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE 'honest-health:%'`,
        [dbName],
      );
      // 6 s at 4 probes a second and 5 writes a second.
      const readyz: string[] = [];
      const writes: number[] = [];
      const end = Date.now() + 6000;
      await Promise.all([
        every(250, end, async () => {
          const body = (await (await server.get('/readyz')).json()) as { checks: { database: string } };
          readyz.push(body.checks.database);
        }),
        every(200, end, async () => void writes.push((await write(server, org.apiKey, 'ro')).status)),
      ]);
      const during = server.logs.slice(mark);
      const readOnlyAnswers = readyz.filter((d) => d === 'read_only').length;
      expect(readOnlyAnswers).toBeGreaterThanOrEqual(15);
      expect(writes.filter((s) => s === 503).length).toBeGreaterThanOrEqual(20);
      expect(writes.filter((s) => s === 500)).toEqual([]);

      // One warning for the episode, not one per probe; disposals damped: the first of each pool is
      // immediate, the next ones wait for a pool age of 0.5 s, 1 s, 2 s: 4 each in 6 s, not 24+.
      expect(started(during).map((l) => l.level)).toEqual(['warn']);
      // The only other warnings: node-postgres' idle clients ended under it, at most one per connection.
      expect(warnings(during)).toEqual([started(during)[0]?.msg]);
      expect(disposed(during, 'app').length).toBeGreaterThanOrEqual(1);
      expect(disposed(during, 'app').length).toBeLessThanOrEqual(6);
      expect(disposed(during, 'probe').length).toBeLessThanOrEqual(6);
      expect(during.filter((l) => l.level === 'error')).toEqual([]);

      // The database takes writes again: the episode ends with its counts.
      await primary.query(`ALTER DATABASE ${dbName} RESET default_transaction_read_only`);
      await until(
        async () => (await server.get('/readyz')).status,
        (s) => s === 200,
      );
      const summary = await awaitSummary(server, mark);
      const episode = server.logs.slice(mark, server.logs.indexOf(summary) + 1);
      expect(summary).toMatchObject({ level: 'warn', episode: 'read-only', ended_by: 'write proven' });
      expect(summary.msg).toMatch(
        /^database read-only episode ended after [0-9.]+ s: \d+ disposals, \d+ probes$/,
      );
      expect(summary.disposals).toBe(disposed(episode, 'app').length + disposed(episode, 'probe').length);
      expect(summary.disposals_app).toBe(disposed(episode, 'app').length);
      expect(Number(summary.probes)).toBeGreaterThanOrEqual(1);
      expect(Number(summary.probes)).toBeLessThanOrEqual(readOnlyAnswers);
      expect(Number(summary.damped)).toBeGreaterThanOrEqual(10);
      expect(Number(summary.seconds)).toBeGreaterThanOrEqual(6);
      expect(started(episode)).toHaveLength(1);
      expect((await write(server, org.apiKey, 'after')).status).toBe(202);
    } finally {
      await server.stop();
    }
  });

  it('a load balancer alternating between the old and the new node: a few app-pool disposals, not a storm', async () => {
    const url = `postgres://postgres@127.0.0.1:${proxy.port}/postgres`;
    const server = await spawnServer({ env: { DATABASE_URL: url, POOL_MAX: '10' } });
    const direct = new pg.Client(primary.url());
    await direct.connect();
    try {
      await server.waitForReady();
      const org = await createOrg(primary.url(), 'Alternating Ltd');
      await waitForKey(server, org.apiKey);
      await waitForReplay(primary, standby);
      const mark = server.logs.length;

      // The old primary drops its connections and, as HAProxy does before its checks catch up, first
      // sends new ones to the old, read-only node: a write now meets 25006 and starts the episode.
      // (Alternating from the first millisecond, a loaded machine can open every connection in a
      // window that leads to the new node, and then there is no failover to see at all.)
      proxy.setTarget(standby.port);
      proxy.dropAll();
      const pinned = await write(server, org.apiKey, 'alt-pinned');
      expect(pinned.status).toBe(503);
      // Then for 3 s new connections land on the standby or the primary in turn.
      let toStandby = true;
      const flip = setInterval(() => {
        toStandby = !toStandby;
        proxy.setTarget(toStandby ? standby.port : primary.port);
      }, 25);
      const statuses: number[] = [];
      const accepted: string[] = [];
      const alternation = Date.now();
      const end = alternation + 3000;
      const writer = () =>
        every(0, end, async () => {
          const res = await write(server, org.apiKey, 'alt');
          statuses.push(res.status);
          if (res.status === 202) accepted.push(((await res.json()) as { id: string }).id);
        });
      try {
        await Promise.all([
          ...Array.from({ length: 10 }, writer),
          every(250, end, async () => void (await server.get('/readyz'))),
        ]);
      } finally {
        clearInterval(flip);
        proxy.setTarget(primary.port);
      }
      const during = server.logs.slice(mark);
      expect(statuses.length).toBeGreaterThanOrEqual(30);
      expect(statuses.filter((s) => s !== 202 && s !== 503)).toEqual([]);
      // The first disposal of each pool is immediate; a pool built since waits 0.5 s, then 1 s, 2 s.
      expect(disposed(during, 'app').length).toBeGreaterThanOrEqual(1);
      expect(disposed(during, 'app').length).toBeLessThanOrEqual(4);
      expect(during.filter((l) => l.level === 'error')).toEqual([]);

      // Back on the primary: ready again, the episode summed up, every accepted invoice stored.
      const summary = await awaitSummary(server, mark);
      // The whole alternation is one episode: one warning when it started, one summary after it
      // ended, and no other warning or episode in between.
      const episode = server.logs.slice(mark, server.logs.indexOf(summary) + 1);
      expect(started(episode).map((l) => l.level)).toEqual(['warn']);
      expect(warnings(episode)).toEqual([started(episode)[0]?.msg, summary.msg]);
      expect(summary).toMatchObject({ level: 'warn', episode: 'read-only' });
      // It did not end mid-alternation: it outlasted the 3 s of it.
      expect(Number(summary.seconds)).toBeGreaterThanOrEqual(3);
      expect(Number(summary.poisoned)).toBeGreaterThanOrEqual(1);
      const stored = await direct.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM invoice_pushes WHERE id = ANY($1::uuid[])',
        [accepted],
      );
      expect(stored.rows[0]?.n).toBe(accepted.length);
      expect((await write(server, org.apiKey, 'after-alt')).status).toBe(202);
      expect(started(server.logs.slice(mark))).toHaveLength(1);
    } finally {
      await direct.end();
      await server.stop();
      proxy.setTarget(primary.port);
    }
  });

  it('a database that goes away and comes back: the api-key registry refresh warns, nothing logs an error', async () => {
    const own = await startCluster();
    const server = await spawnServer({
      env: { DATABASE_URL: own.url(), API_KEY_REFRESH_MS: '100', PROBE_TIMEOUT_MS: '1000' },
    });
    try {
      await server.waitForReady();
      const mark = server.logs.length;
      await own.stop('fast');
      await server.waitForLog(
        (l) => l.msg.startsWith('loop run failed') && l.loop === 'api-key registry refresh',
        10_000,
      );
      await own.start();
      await until(
        async () => (await server.get('/readyz')).status,
        (s) => s === 200,
      );
      const lines = server.logs.slice(mark);
      const failed = lines.filter((l) => l.msg.startsWith('loop run failed'));
      expect(failed.length).toBeGreaterThanOrEqual(1);
      expect(failed.map((l) => `${l.level} ${l.msg}`)).toEqual(
        failed.map(() => 'warn loop run failed: database unavailable'),
      );
      expect(lines.filter((l) => l.level === 'error')).toEqual([]);
    } finally {
      await server.stop();
      await own.remove();
    }
  });
});

describe('/readyz?verbose', () => {
  it('reports the replication settings the probe read, and whether a commit waits for a standby', async () => {
    const url = await freshDatabase(primary);
    const server = await spawnServer({ env: { DATABASE_URL: url } });
    try {
      await server.waitForReady();
      const verbose = async () =>
        (
          (await (await server.get('/readyz?verbose')).json()) as {
            details: { database: { replication?: Record<string, unknown> } };
          }
        ).details.database.replication;
      // What an operator needs, not the standbys' names (synchronous_standby_names is never shown).
      expect(await verbose()).toEqual({ synchronous_commit: 'on', commit_waits_for_standby: false });
      // The standby streams from this primary: name it synchronous, and every commit waits for it.
      await primary.query(`ALTER SYSTEM SET synchronous_standby_names = '*'`);
      await primary.query('SELECT pg_reload_conf()');
      const sync = await until(verbose, (r) => r?.commit_waits_for_standby === true);
      expect(sync).toEqual({ synchronous_commit: 'on', commit_waits_for_standby: true });
    } finally {
      await primary.query('ALTER SYSTEM RESET synchronous_standby_names');
      await primary.query('SELECT pg_reload_conf()');
      await server.stop();
    }
  });
});
