// Failover drills (a), (c) and (d) through the Neon drivers: the server (a child process, the Node
// entry) talks to the local Neon proxy, whose upstream is the TCP fault proxy in front of a real
// primary and a real streaming standby.
//
// What "pinned" means here. neon-ws: the application pool's WebSocket sessions; each one is piped to
// its own TCP connection, opened through the fault proxy when the session started, exactly like a
// node-postgres connection. neon-http (the app's driver, and the probe's under both): the app holds no
// connection at all, so it has nothing to dispose; what gets pinned is the Neon proxy's upstream pool
// (as with Neon's own pooler). The proxy discards a connection whose query failed, so every failed
// write unpins one; the app's part is to answer 503 + Retry-After and to retry once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NeonProxy, startNeonProxy } from '../dev/neon-proxy/server.js';
import {
  bootDrill,
  type Drill,
  expectNoRestart,
  poisonedSince,
  underTrafficDrill,
  watched,
} from './support/drill.js';
import {
  backends,
  type DrillDriver,
  listInvoices,
  type Pair,
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
const PROBE_MARGIN_MS = 1500;
const RECOVERY_MS = 1000;

let pair: Pair;
let neonProxy: NeonProxy;
beforeAll(async () => {
  pair = await startPair();
  neonProxy = await startNeonProxy({ upstream: `postgres://postgres@127.0.0.1:${pair.proxy.port}/postgres` });
});
afterAll(async () => {
  await neonProxy?.close();
  await pair?.remove();
});

// The host is only a label: the Neon proxy dials its one upstream (the fault proxy) whatever it says.
const boot = (driver: DrillDriver, extra: Record<string, string> = {}) =>
  bootDrill(pair, (db) => serverEnv(driver, pair.proxyUrl(db), extra, neonProxy.url));

/**
 * Writes until one is stored, at most `maxAttempts` times. Every failure on the way must be the
 * retry-shortly answer, never a 500.
 */
async function writeUntilStored(drill: Drill, maxAttempts: number): Promise<WriteOutcome[]> {
  const attempts: WriteOutcome[] = [];
  for (let i = 0; i < maxAttempts; i++) {
    const outcome = await drill.write();
    attempts.push(outcome);
    if (outcome.status === 202) break;
    await sleep(100);
  }
  return attempts;
}

/**
 * The writes since `mark` met the pinned node and said so (25006, poisoned). neon-ws's own sessions stay
 * pinned until it disposes them. neon-http's pinned connections are the Neon proxy's, and any failed
 * query unpins one (a tick's, the probe's), so the first write may find none left: then nothing of it
 * was poisoned, and there is nothing to see.
 */
function expectPoisonSeen(driver: DrillDriver, drill: Drill, mark: number, attempts: WriteOutcome[]): void {
  if (driver === 'neon-ws' || attempts.length > 1) {
    expect(poisonedSince(drill.server, mark, '25006').length).toBeGreaterThan(0);
  }
}

describe.each(['neon-ws', 'neon-http'] as const)(
  'failover drills (%s via the local Neon proxy)',
  (driver) => {
    it('a. pinned to the demoted node: read_only, then ok without a restart; writes recover', async () => {
      const drill = await boot(driver);
      const { server, db, org } = drill;
      await watched(server, async () => {
        await waitForReplay(pair.primary, pair.standby);

        pair.proxy.setTarget(pair.standby.port);
        pair.proxy.dropAll();
        const readOnly = await until(
          () => readyz(server),
          (r) => r.database === 'read_only',
          10_000,
        );
        expect(readOnly).toMatchObject({ status: 503, boot: 'ok', database: 'read_only' });
        const pinnedWrite = await drill.write();
        expect(pinnedWrite).toMatchObject({ status: 503, retryAfter: '1', code: 'database_unavailable' });
        const reads = await Promise.all([1, 2, 3].map(() => listInvoices(server, org.apiKey)));
        expect(reads).toEqual([200, 200, 200]);
        // neon-ws: the app's WebSocket sessions; neon-http: the Neon proxy's upstream pool.
        const pinned = await backends(pair.standby, db);
        expect(pinned.length).toBeGreaterThan(0);

        pair.proxy.setTarget(pair.primary.port);
        const mark = server.logs.length;
        // neon-ws disposes its pool and retries: the first write is stored. neon-http cannot dispose the
        // proxy's pool: each failed attempt unpins one connection, so it is bounded by their number.
        const attempts = await writeUntilStored(drill, driver === 'neon-ws' ? 1 : pinned.length + 1);
        expect(attempts.at(-1)?.status).toBe(202);
        for (const failed of attempts.slice(0, -1)) {
          expect(failed).toMatchObject({ status: 503, retryAfter: '1', code: 'database_unavailable' });
        }
        expectPoisonSeen(driver, drill, mark, attempts);
        const ok = await until(
          () => readyz(server),
          (r) => r.status === 200,
          10_000,
        );
        expect(ok).toMatchObject({ status: 200, database: 'ok' });
        const stored = attempts.at(-1)?.key ?? '';
        expect(await pushCount(pair.primary, db, [stored])).toBe(1);
        expect(await pushCount(pair.primary, db, [pinnedWrite.key])).toBe(0);
        expect(drill.writes.filter((w) => w.status === 500)).toEqual([]);
        expectNoRestart(server);
      });
    });

    it('a. under traffic: a steady writer only ever gets 202 or 503 + Retry-After, and every write is stored again within 1 s', async () => {
      await underTrafficDrill(pair, await boot(driver), RECOVERY_MS);
    });

    it('c. black hole: readyz answers 503 timeout within PROBE_TIMEOUT_MS plus a margin, then recovers', async () => {
      const drill = await boot(driver, { PROBE_TIMEOUT_MS: String(PROBE_TIMEOUT_MS) });
      const { server } = drill;
      await watched(server, async () => {
        expect((await readyz(server)).status).toBe(200);
        pair.proxy.blackhole(true);
        for (let i = 0; i < 2; i++) {
          const hole = await readyz(server);
          expect(hole).toMatchObject({ status: 503, database: 'timeout' });
          expect(hole.ms).toBeLessThan(PROBE_TIMEOUT_MS + PROBE_MARGIN_MS);
        }
        pair.proxy.blackhole(false);
        const back = await until(
          () => readyz(server),
          (r) => r.status === 200,
          15_000,
        );
        expect(back.database).toBe('ok');
        const attempts = await writeUntilStored(drill, 3);
        expect(attempts.at(-1)?.status).toBe(202);
        expect(drill.writes.filter((w) => w.status === 500)).toEqual([]);
        expectNoRestart(server);
      });
    });

    it('d. the incident: sessions opened with default_transaction_read_only = on', async () => {
      const drill = await boot(driver);
      const { server, db, org } = drill;
      await watched(server, async () => {
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
        const pinned = await backends(pair.primary, db);
        expect(pinned.length).toBeGreaterThan(0);

        await pair.primary.query(`ALTER DATABASE ${db} RESET default_transaction_read_only`);
        const mark = server.logs.length;
        const attempts = await writeUntilStored(drill, driver === 'neon-ws' ? 1 : pinned.length + 1);
        expect(attempts.at(-1)?.status).toBe(202);
        for (const failed of attempts.slice(0, -1)) {
          expect(failed).toMatchObject({ status: 503, retryAfter: '1', code: 'database_unavailable' });
        }
        expectPoisonSeen(driver, drill, mark, attempts);
        const ok = await until(
          () => readyz(server),
          (r) => r.status === 200,
          10_000,
        );
        expect(ok.database).toBe('ok');
        expect(await pushCount(pair.primary, db, [attempts.at(-1)?.key ?? ''])).toBe(1);
        expect(await pushCount(pair.primary, db, [pinnedWrite.key])).toBe(0);
        expect(drill.writes.filter((w) => w.status === 500)).toEqual([]);
        expectNoRestart(server);
      });
    });
  },
);
