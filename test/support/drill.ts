// The frame every failover drill shares (test/failover-*.test.ts): a server booted on a fresh database
// with an organization that can write, a liveness watch around the drill, and the under-traffic drill
// itself, which runs the same on every driver.
import { expect } from 'vitest';
import {
  createOrg,
  livenessFailures,
  type Org,
  type Pair,
  pinnedUnderTraffic,
  postInvoice,
  pushCount,
  storedKeys,
  type TrafficOptions,
  trafficViolations,
  until,
  type WriteOutcome,
  watchLiveness,
} from './failover.js';
import { waitForReplay } from './postgres.js';
import { type ServerProcess, spawnServer } from './server.js';

export interface Drill {
  db: string;
  server: ServerProcess;
  org: Org;
  /** Every write the drill made, so it can check that none was answered 500. */
  writes: WriteOutcome[];
  write(): Promise<WriteOutcome>;
}

/** A fresh database, the server booted with `env(db)` (the proxy pointed at the primary), an organization. */
export async function bootDrill(pair: Pair, env: (db: string) => Record<string, string>): Promise<Drill> {
  pair.proxy.setTarget(pair.primary.port);
  const db = await pair.freshDatabase();
  const server = await spawnServer({ env: env(db) });
  await server.waitForReady();
  const org = await createOrg(pair.primary, db);
  const writes: WriteOutcome[] = [];
  const drill: Drill = {
    db,
    server,
    org,
    writes,
    async write() {
      const outcome = await postInvoice(server, org.apiKey);
      writes.push(outcome);
      return outcome;
    },
  };
  // The server picks the organization up on its next api-key registry refresh (API_KEY_REFRESH_MS = 200).
  const first = await until(
    () => postInvoice(server, org.apiKey),
    (w) => w.status !== 401,
    5000,
  );
  expect(first.status).toBe(202);
  return drill;
}

/**
 * Runs `body` while /livez is polled, then stops the server. Liveness is checked after the body, so
 * that a failure inside it is the one reported.
 */
export async function watched(server: ServerProcess, body: () => Promise<void>): Promise<void> {
  const live = watchLiveness(server);
  let liveness: number[] = [];
  try {
    await body();
  } finally {
    liveness = await live.stop();
    await server.stop();
  }
  expect(livenessFailures(liveness)).toEqual([]);
}

export const poisonedSince = (server: ServerProcess, mark: number, reason: string) =>
  server.logs.slice(mark).filter((l) => l.msg === 'database pool poisoned' && l.reason === reason);

export function expectNoRestart(server: ServerProcess): void {
  expect(server.child.exitCode).toBeNull();
  expect(server.logs.filter((l) => l.msg === 'boot complete')).toHaveLength(1);
}

/**
 * Drill (a) under traffic: a steady writer and a /readyz poller while the pool is pinned to the
 * standby for a second. Every write gets 202 or 503 + Retry-After, and every one sent `recoveryMs`
 * after the primary is back is stored.
 */
export async function underTrafficDrill(
  pair: Pair,
  drill: Drill,
  recoveryMs: number,
  options: Partial<TrafficOptions> = {},
): Promise<void> {
  const { server, db, org } = drill;
  await watched(server, async () => {
    await waitForReplay(pair.primary, pair.standby);
    const run = await pinnedUnderTraffic(pair, [{ url: server.url, apiKey: org.apiKey }], {
      warmupMs: 500,
      waitForReadOnlyMs: 10_000,
      readBurstBeforeT1: 4,
      pinnedMs: 1000,
      observeMs: 2000,
      ...options,
    });
    expect(trafficViolations(run, 0, recoveryMs)).toEqual([]);
    const keys = storedKeys(run, 0);
    expect(await pushCount(pair.primary, db, keys)).toBe(keys.length);
    expectNoRestart(server);
  });
}
