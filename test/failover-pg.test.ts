// Failover drills through node-postgres: a real primary, a real streaming standby and the TCP fault
// proxy in front of them; the server runs as a user runs it (`node dist/node.js`, a child process).
// The Neon drivers run drills (a), (c) and (d) in failover-neon.test.ts.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootDrill, expectNoRestart, poisonedSince, underTrafficDrill, watched } from './support/drill.js';
import {
  backends,
  listInvoices,
  type Pair,
  postInvoice,
  pushCount,
  readyz,
  serverEnv,
  sleep,
  startPair,
  terminateBackends,
  until,
  type WriteOutcome,
} from './support/failover.js';
import { waitForReplay } from './support/postgres.js';

// Drill (c) only; the others keep the default (2000 ms), which a starved machine does not trip.
const PROBE_TIMEOUT_MS = 1000;
// A bound, not a benchmark: the probe's own timeout plus a margin for a loaded 2-core machine.
const PROBE_MARGIN_MS = 1500;
const APP = 'honest-health:app';
// Under traffic, every write sent this long after the primary is reachable again must be stored.
const RECOVERY_MS = 1000;

let pair: Pair;
beforeAll(async () => {
  pair = await startPair();
});
afterAll(async () => {
  await pair?.remove();
});

/** A fresh database and the server booted through the fault proxy (or `url(db)`), with an organization. */
const boot = (extra: Record<string, string> = {}, url?: (db: string) => string) =>
  bootDrill(pair, (db) => serverEnv('pg', url?.(db) ?? pair.proxyUrl(db), extra));

describe('failover drills (pg)', () => {
  it('a. pinned to the demoted node: read_only, then ok without a restart; the write after the dispose succeeds', async () => {
    const drill = await boot();
    const { server, db, org } = drill;
    await watched(server, async () => {
      // The org must be on the standby too, or the api-key registry refresh there would forget it.
      await waitForReplay(pair.primary, pair.standby);

      // Every connection the server holds, and every new one, now leads to the read-only standby.
      pair.proxy.setTarget(pair.standby.port);
      pair.proxy.dropAll();
      const readOnly = await until(
        () => readyz(server),
        (r) => r.database === 'read_only',
        10_000,
      );
      expect(readOnly).toMatchObject({ status: 503, boot: 'ok', database: 'read_only' });
      // A write while pinned: told to come back shortly, never a 500.
      const pinnedWrite = await drill.write();
      expect(pinnedWrite).toMatchObject({ status: 503, retryAfter: '1', code: 'database_unavailable' });
      // Reads still work on the demoted node (why a SELECT 1 check stays green); they also fill the
      // application pool with connections to the standby.
      const reads = await Promise.all([1, 2, 3].map(() => listInvoices(server, org.apiKey)));
      expect(reads).toEqual([200, 200, 200]);
      const pinned = await backends(pair.standby, db, APP);
      expect(pinned.length).toBeGreaterThan(0);

      // The new primary takes new connections; the pooled ones are still on the standby.
      pair.proxy.setTarget(pair.primary.port);
      const mark = server.logs.length;
      const write = await drill.write();
      expect(write.status).toBe(202);
      // It got there through a dispose: its first attempt met 25006 on a pinned connection.
      expect(poisonedSince(server, mark, '25006').length).toBeGreaterThan(0);
      const ok = await until(
        () => readyz(server),
        (r) => r.status === 200,
        10_000,
      );
      expect(ok).toMatchObject({ status: 200, database: 'ok' });
      expect(await pushCount(pair.primary, db, [write.key])).toBe(1);
      expect(await pushCount(pair.primary, db, [pinnedWrite.key])).toBe(0);
      // The disposed pool let go of the standby.
      const left = await until(
        () => backends(pair.standby, db, APP),
        (b) => b.length === 0,
        5000,
      );
      expect(left).toEqual([]);
      expect(drill.writes.filter((w) => w.status === 500)).toEqual([]);
      expectNoRestart(server);
    });
  });

  it('a. under traffic: a steady writer only ever gets 202 or 503 + Retry-After, and every write is stored again within 1 s', async () => {
    // The benchmark's rates (one POST per 50 ms, /readyz every 100 ms): the pool is disposed while
    // requests are queued for it, which is where a dispose can strand them.
    await underTrafficDrill(pair, await boot(), RECOVERY_MS, { writeEveryMs: 50, readyzEveryMs: 100 });
  });

  it('POSTs through a failover: 202 or 503 + Retry-After, never 500; retried with the same key, every invoice exists once', async () => {
    const drill = await boot();
    const { server, db, org } = drill;
    try {
      await waitForReplay(pair.primary, pair.standby);
      // Four clients, each submitting its invoices one after another and retrying a 503 with the same
      // Idempotency-Key after Retry-After, as a well-behaved client of the API does.
      const answers: WriteOutcome[] = [];
      const stored = new Map<string, string>();
      let pinnedAt: number | undefined;
      const client = async (invoices: number) => {
        for (let i = 0; i < invoices; i++) {
          const key = randomUUID();
          for (let attempt = 0; attempt < 30; attempt++) {
            const answer = await postInvoice(server, org.apiKey, key);
            answers.push(answer);
            if (answer.status === 202 || answer.status === 200) {
              stored.set(key, answer.id ?? '');
              break;
            }
            if (answer.status !== 503) break;
            await sleep(Number(answer.retryAfter) * 1000);
          }
          await sleep(20);
        }
      };
      const clients = Promise.all([1, 2, 3, 4].map(() => client(25)));
      await until(
        async () => answers.length,
        (n) => n >= 20,
        10_000,
      );
      pinnedAt = answers.length;
      pair.proxy.setTarget(pair.standby.port);
      pair.proxy.dropAll();
      await until(
        async () => answers.slice(pinnedAt).filter((a) => a.status === 503).length,
        (n) => n >= 4,
        10_000,
      );
      pair.proxy.setTarget(pair.primary.port);
      await clients;

      // The failover really met the POSTs, and each was answered with "come back shortly", nothing worse.
      expect(answers.filter((a) => a.status === 503).length).toBeGreaterThanOrEqual(4);
      expect(
        answers.filter(
          (a) =>
            !(a.status === 202 || a.status === 200) &&
            !(a.status === 503 && a.retryAfter === '1' && a.code === 'database_unavailable'),
        ),
      ).toEqual([]);
      // Every invoice arrived in the end, exactly once, and a replay of its key returns the same push.
      expect(stored.size).toBe(100);
      expect(await pushCount(pair.primary, db, [...stored.keys()])).toBe(100);
      expect(await pushCount(pair.primary, db)).toBe(101); // plus boot()'s first write
      for (const [key, id] of [...stored].slice(0, 10)) {
        const replay = await postInvoice(server, org.apiKey, key);
        expect(replay).toMatchObject({ status: 200, id });
      }
      expectNoRestart(server);
    } finally {
      await server.stop();
    }
  });

  it('c. black hole: readyz answers 503 timeout within PROBE_TIMEOUT_MS plus a margin, then recovers', async () => {
    const drill = await boot({ PROBE_TIMEOUT_MS: String(PROBE_TIMEOUT_MS) });
    const { server } = drill;
    await watched(server, async () => {
      expect((await readyz(server)).status).toBe(200);
      pair.proxy.blackhole(true);
      // Twice: once on the probe pool's open connection, once on a connection that never opens.
      for (let i = 0; i < 2; i++) {
        const hole = await readyz(server);
        expect(hole).toMatchObject({ status: 503, database: 'timeout' });
        expect(hole.ms).toBeLessThan(PROBE_TIMEOUT_MS + PROBE_MARGIN_MS);
      }
      pair.proxy.blackhole(false);
      const back = await until(
        () => readyz(server),
        (r) => r.status === 200,
        10_000,
      );
      expect(back.database).toBe('ok');
      expect((await drill.write()).status).toBe(202);
      expect(drill.writes.filter((w) => w.status === 500)).toEqual([]);
      expectNoRestart(server);
    });
  });

  it('d. the incident: sessions opened with default_transaction_read_only = on', async () => {
    const drill = await boot();
    const { server, db, org } = drill;
    await watched(server, async () => {
      // New sessions come up read-only (25006 on every write, reads fine, pg_is_in_recovery() false);
      // terminating the server's sessions makes its pools open such sessions.
      await pair.primary.query(`ALTER DATABASE ${db} SET default_transaction_read_only = on`);
      await terminateBackends(pair.primary, db);
      const readOnly = await until(
        () => readyz(server),
        (r) => r.database === 'read_only',
        10_000,
      );
      expect(readOnly).toMatchObject({ status: 503, database: 'read_only', reason: '25006' });
      const pinnedWrite = await drill.write();
      expect(pinnedWrite).toMatchObject({ status: 503, retryAfter: '1', code: 'database_unavailable' });
      const reads = await Promise.all([1, 2, 3].map(() => listInvoices(server, org.apiKey)));
      expect(reads).toEqual([200, 200, 200]);
      expect((await backends(pair.primary, db, APP)).length).toBeGreaterThan(0);

      // Fixed for new sessions; the pooled ones keep the read-only default they started with.
      await pair.primary.query(`ALTER DATABASE ${db} RESET default_transaction_read_only`);
      const mark = server.logs.length;
      const write = await drill.write();
      expect(write.status).toBe(202);
      expect(poisonedSince(server, mark, '25006').length).toBeGreaterThan(0);
      const ok = await until(
        () => readyz(server),
        (r) => r.status === 200,
        10_000,
      );
      expect(ok.database).toBe('ok');
      expect(await pushCount(pair.primary, db, [write.key])).toBe(1);
      expect(await pushCount(pair.primary, db, [pinnedWrite.key])).toBe(0);
      expect(drill.writes.filter((w) => w.status === 500)).toEqual([]);
      expectNoRestart(server);
    });
  });

  it('e. max lifetime: no connection older than POOL_MAX_LIFETIME_S is handed out', async () => {
    const lifetimeS = 2;
    const marginS = 1.5;
    // Straight to the primary: nothing between the pool and pg_stat_activity's backend_start.
    const drill = await boot({ POOL_MAX_LIFETIME_S: String(lifetimeS) }, (db) => pair.primary.url(db));
    const { server, db } = drill;
    try {
      const stopAt = Date.now() + 3.5 * lifetimeS * 1000;
      const ages: Record<string, number> = {};
      const pids: Record<string, Set<number>> = {};
      let samples = 0;
      let busiest = 0;
      const writers = [0, 1, 2].map(async () => {
        while (Date.now() < stopAt) {
          await drill.write();
          await sleep(50);
        }
      });
      const prober = (async () => {
        while (Date.now() < stopAt) {
          await readyz(server);
          await sleep(250);
        }
      })();
      while (Date.now() < stopAt) {
        const seen = (await backends(pair.primary, db)).filter((b) =>
          b.application_name.startsWith('honest-health:'),
        );
        samples += 1;
        busiest = Math.max(busiest, seen.filter((b) => b.application_name === APP).length);
        for (const b of seen) {
          ages[b.application_name] = Math.max(ages[b.application_name] ?? 0, b.age_s);
          const set = pids[b.application_name] ?? new Set<number>();
          set.add(b.pid);
          pids[b.application_name] = set;
        }
        await sleep(150);
      }
      await Promise.all([...writers, prober]);

      expect(samples).toBeGreaterThan(10);
      expect(drill.writes.length).toBeGreaterThan(30);
      expect(drill.writes.filter((w) => w.status !== 202)).toEqual([]);
      expect(ages[APP]).toBeDefined();
      expect(ages[APP]).toBeLessThan(lifetimeS + marginS);
      expect(ages['honest-health:probe'] ?? 0).toBeLessThan(lifetimeS + marginS);
      // Connections were really replaced, not merely idle: more distinct backends than ever at once.
      expect(pids[APP]?.size ?? 0).toBeGreaterThan(busiest);
      expectNoRestart(server);
    } finally {
      await server.stop();
    }
  });

  // Last: it stops the primary and promotes the standby, so the pair is spent afterwards.
  it('b. primary lost, standby promoted: the server recovers without a restart', async () => {
    const drill = await boot();
    const { server, db } = drill;
    await watched(server, async () => {
      const baseline = await drill.write();
      expect(baseline.status).toBe(202);
      await waitForReplay(pair.primary, pair.standby);

      await pair.primary.stop('fast');
      const down = await readyz(server);
      expect(down).toMatchObject({ status: 503, database: 'unreachable' });
      // A write during the outage: 503 + Retry-After (the client comes back), never a 500.
      const outageWrite = await drill.write();
      expect(outageWrite).toMatchObject({ status: 503, retryAfter: '1', code: 'database_unavailable' });

      await pair.standby.promote();
      pair.proxy.setTarget(pair.standby.port);
      const back = await until(
        () => readyz(server),
        (r) => r.status === 200,
        10_000,
      );
      expect(back).toMatchObject({ status: 200, database: 'ok' });
      const write = await drill.write();
      expect(write.status).toBe(202);
      // The promoted standby has what the primary acknowledged before it went, and the new write.
      expect(await pushCount(pair.standby, db, [baseline.key, write.key])).toBe(2);
      expect(await pushCount(pair.standby, db, [outageWrite.key])).toBe(0);
      expect(drill.writes.filter((w) => w.status === 500)).toEqual([]);
      expectNoRestart(server);
    });
  });
});
