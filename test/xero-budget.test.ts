// The shared Xero budget (docs/xero-budget.md): one budget in Postgres for every replica and isolate.
// Real Postgres, real server processes, Worker-style invocations over neon-http through the local
// Neon proxy, and the Xero sandbox enforcing Xero's limits (windows shortened alike on both sides).

import type { Database } from '@honest-health/platform';
import { loadConfig } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import { DatabaseHandle } from '@honest-health/platform/db';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NeonProxy, startNeonProxy } from '../dev/neon-proxy/server.js';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { AccessTokenCache } from '../src/app/connections/grants.js';
import { openDriver } from '../src/app/databases.js';
import { shortenedXeroBudget, XERO_BUDGET, type XeroBudget } from '../src/app/push/budget.js';
import { claimPushes } from '../src/app/push/claim.js';
import { type PushTickDeps, pushDueInvoices } from '../src/app/push/tick.js';
import { createXeroClient } from '../src/app/xero/client.js';
import { migratedDatabase } from './support/databases.js';
import type { Cluster } from './support/postgres.js';
import { type ServerProcess, spawnServer, TEST_TOKEN_KEY } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import {
  captureLog,
  connectedOrganization,
  openDatabase,
  pushRow,
  queueBacklog,
  queuePush,
  type Sandbox,
  sandboxEnv,
  testBox,
  xeroConfigFor,
} from './support/ticks.js';
import { until } from './support/until.js';

// A shortened minute for the test, on both sides alike (XERO_BUDGET_TEST_MINUTE_MS and the sandbox's
// minuteMs). Xero's counts (5, 60, 5,000, 10,000) stay as they are.
const MINUTE_MS = 3000;
// A call may start up to 1 s after its claim: a loaded 2-core machine can take longer than a fifth of a
// second to decrypt a token and open a socket. The servers get the same (XERO_BUDGET_TEST_SEND_WITHIN_MS)
// and the same function builds both budgets: an isolate here that gave its calls longer to start than
// the servers counted them for let its late calls slip past their count (429 `minute`).
const SEND_WITHIN_MS = 1000;
const BUDGET: XeroBudget = shortenedXeroBudget(MINUTE_MS, XERO_BUDGET.dayMs, SEND_WITHIN_MS);

let cluster: Cluster;
let sandbox: Sandbox;
let neon: NeonProxy;
let box: SecretBox;
const { log } = captureLog();
const handles: DatabaseHandle[] = [];

beforeAll(async () => {
  [cluster, sandbox] = await Promise.all([
    sharedCluster(),
    startXeroSandbox({ port: 0, limits: { minuteMs: MINUTE_MS, latencyMs: 20 } }),
  ]);
  neon = await startNeonProxy({ upstream: cluster.url('postgres') });
  box = await testBox();
});
afterAll(async () => {
  await Promise.all(handles.map((h) => h.close()));
  await neon?.close();
  await sandbox?.close();
  await cluster?.remove();
});

type Driver = 'pg' | 'neon-http';

/** A handle over `driver` to an already migrated database, as a replica or an isolate opens it. */
async function handleOver(driver: Driver, url: string): Promise<DatabaseHandle> {
  const env =
    driver === 'pg'
      ? { DATABASE_URL: url, DATABASE_DRIVER: 'pg' }
      : { DATABASE_URL: url, DATABASE_DRIVER: 'neon-http', NEON_LOCAL_PROXY: neon.url };
  const d = openDriver(loadConfig(env), log);
  await d.ready();
  const handle = new DatabaseHandle(d, 'app', log);
  handles.push(handle);
  return handle;
}

/** A migrated database (always migrated over pg: never through neon-http, which has no rollback). */
async function database(): Promise<{ url: string; setup: Database }> {
  const url = await migratedDatabase(cluster);
  const setup = await openDatabase(url, log);
  handles.push(setup);
  return { url, setup: setup.db };
}

function deps(overrides: Partial<PushTickDeps> = {}): PushTickDeps {
  return {
    xero: createXeroClient(xeroConfigFor(sandbox)),
    box,
    budget: BUDGET,
    tokens: new AccessTokenCache(),
    owner: 'replica-a',
    maxAttempts: 12,
    batchSize: 100,
    leaseMs: 60_000,
    backoff: { baseMs: 30_000, maxMs: 3_600_000 },
    log,
    ...overrides,
  };
}

async function count(url: string, where: string): Promise<number> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return (await client.query(`SELECT count(*)::int AS n FROM invoice_pushes WHERE ${where}`)).rows[0].n;
  } finally {
    await client.end();
  }
}

const limited = () => sandbox.state.statsSnapshot().rateLimitedByProblem;
const created = (tenantId: string) => sandbox.state.statsSnapshot().invoicesCreated[tenantId] ?? 0;

function tickingServer(url: string): Promise<ServerProcess> {
  return spawnServer({
    env: {
      DATABASE_URL: url,
      TOKEN_ENCRYPTION_KEY: TEST_TOKEN_KEY,
      ...sandboxEnv(sandbox),
      TICK_INTERVAL_MS: '100',
      PUSH_BATCH_SIZE: '100',
      XERO_BUDGET_TEST_MINUTE_MS: String(MINUTE_MS),
      XERO_BUDGET_TEST_SEND_WITHIN_MS: String(SEND_WITHIN_MS),
    },
  });
}

describe('one budget for two server processes and Worker-style invocations', () => {
  it('one tenant: never more than 5 in flight nor more than the minute allows, each push once', async () => {
    const PUSHES = 150;
    const { url, setup } = await database();
    const { org, tenantId, connectionId } = await connectedOrganization(setup, box, sandbox, 'Shared Co');
    await queueBacklog(setup, org.id, connectionId, PUSHES, 'shared');
    const before = limited();

    const servers = await Promise.all([tickingServer(url), tickingServer(url)]);
    // An isolate keeps nothing between invocations: a fresh neon-http handle and token cache each time.
    let isolatePushed = 0;
    let stop = false;
    const isolate = (async () => {
      while (!stop) {
        const handle = await handleOver('neon-http', url);
        const result = await pushDueInvoices(handle.db, deps({ owner: `isolate-${Date.now()}` }));
        isolatePushed += result.pushed;
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    try {
      await until(
        () => count(url, `status = 'pushed'`),
        (n) => n === PUSHES,
        90_000,
        250,
      );
    } finally {
      stop = true;
      await isolate;
      await Promise.all(servers.map((s) => s.stop()));
    }
    // The sandbox answers 429 `concurrent` to a sixth call in flight and `minute` beyond 60 in its
    // rolling minute: none of either, across the three.
    expect(limited()).toEqual(before);
    expect(created(tenantId)).toBe(PUSHES);
    expect(await count(url, `xero_invoice_id IS NULL`)).toBe(0);
    // The isolate really took part (the servers did: it could not have pushed all of them alone).
    expect(isolatePushed).toBeGreaterThan(0);
    expect(isolatePushed).toBeLessThan(PUSHES);
  });
});

describe.each(['pg', 'neon-http'] as const)('the shared budget over %s', (driver) => {
  it("returns a crashed process's in-flight slots when its lease expires", async () => {
    const { url, setup } = await database();
    const db = (await handleOver(driver, url)).db;
    const { org, tenantId, connectionId } = await connectedOrganization(
      setup,
      box,
      sandbox,
      `Crash Co ${driver}`,
    );
    await queueBacklog(setup, org.id, connectionId, 8, 'crash');
    // A process claims (taking the tenant's 5 slots) and dies before it sends or settles anything.
    const crashed = await claimPushes(db, {
      owner: 'crashed',
      leaseMs: 1500,
      batchSize: 100,
      budget: BUDGET,
    });
    expect(crashed.pushes).toHaveLength(5);
    // Its slots are still held: the survivor's claim leaves the tenant alone, even with 3 pushes due.
    expect(await pushDueInvoices(db, deps({ owner: 'survivor' }))).toMatchObject({ claimed: 0 });
    await new Promise((r) => setTimeout(r, 1600));
    // The lease (and with it every slot) expired: the survivor has the tenant's 5 slots again.
    expect(await pushDueInvoices(db, deps({ owner: 'survivor' }))).toMatchObject({ claimed: 5, pushed: 5 });
    expect(created(tenantId)).toBe(5);
  });

  it("lowers the budget to what Xero's X-MinLimit-Remaining says is left", async () => {
    const { url, setup } = await database();
    const db = (await handleOver(driver, url)).db;
    const { org, tenantId, connectionId, grantId } = await connectedOrganization(
      setup,
      box,
      sandbox,
      `Shared Elsewhere Co ${driver}`,
    );
    // Another app instance of the customer's spends 52 of the tenant's minute (4 at a time, within
    // Xero's 5 in flight): we never counted them.
    const xero = createXeroClient(xeroConfigFor(sandbox));
    const token = await accessToken(setup, grantId);
    await Promise.all(
      Array.from({ length: 4 }, async (_, lane) => {
        for (let i = 0; i < 13; i++)
          await xero.putInvoice(token, tenantId, `elsewhere-${lane}-${i}`, invoice());
      }),
    );
    await queueBacklog(setup, org.id, connectionId, 12, 'lowered');
    const before = limited();
    // Our count says 60 are left; 5 go (the slots), and their answers say 3 are left.
    expect(await pushDueInvoices(db, deps())).toMatchObject({ claimed: 5, pushed: 5 });
    // The next claim takes only those 3 (our count alone would allow 52), and no 429 `minute` is met.
    expect(await pushDueInvoices(db, deps())).toMatchObject({ claimed: 3, pushed: 3 });
    expect(await pushDueInvoices(db, deps())).toMatchObject({ claimed: 0 });
    expect(limited()).toEqual(before);
    expect(await count(url, `status = 'queued' AND attempts = 0`)).toBe(4);
  });

  it('a day 429 parks the tenant until Retry-After; an appminute 429 pauses every tenant', async () => {
    const { url, setup } = await database();
    const db = (await handleOver(driver, url)).db;
    const parked = await connectedOrganization(setup, box, sandbox, `Parked Co ${driver}`);
    const other = await connectedOrganization(setup, box, sandbox, `Other Co ${driver}`);
    const first = await queuePush(setup, parked.org.id, 'day-1');
    sandbox.state.faults.add({ target: 'invoices', kind: '429', problem: 'day', retryAfterSeconds: 2 });
    expect(await pushDueInvoices(db, deps())).toMatchObject({ claimed: 1, retrying: 1 });
    const second = await queuePush(setup, parked.org.id, 'day-2');
    const elsewhere = await queuePush(setup, other.org.id, 'day-other');
    // Parked: its pushes are not claimed (no attempt spent); the other tenant goes on.
    expect(await pushDueInvoices(db, deps())).toMatchObject({ claimed: 1, pushed: 1 });
    expect(await pushRow(url, second)).toMatchObject({ status: 'queued', attempts: 0, lease_owner: null });
    expect(await pushRow(url, elsewhere)).toMatchObject({ status: 'pushed' });
    await new Promise((r) => setTimeout(r, 2100));
    // The reset: both of the parked tenant's pushes go.
    expect(await pushDueInvoices(db, deps())).toMatchObject({ claimed: 2, pushed: 2 });
    expect(await pushRow(url, first)).toMatchObject({ status: 'pushed' });

    // appminute: every tenant waits for the app's minute (Xero sends no Retry-After for it).
    await queuePush(setup, parked.org.id, 'app-1');
    sandbox.state.faults.add({ target: 'invoices', kind: '429', problem: 'appminute' });
    expect(await pushDueInvoices(db, deps())).toMatchObject({ claimed: 1, retrying: 1 });
    const waiting = await queuePush(setup, other.org.id, 'app-2');
    expect(await pushDueInvoices(db, deps())).toMatchObject({ claimed: 0 });
    expect(await pushRow(url, waiting)).toMatchObject({ status: 'queued', attempts: 0 });
    await new Promise((r) => setTimeout(r, MINUTE_MS + 100));
    expect(await pushDueInvoices(db, deps())).toMatchObject({ claimed: 2, pushed: 2 });
  });
});

function invoice() {
  return {
    Type: 'ACCREC',
    Contact: { Name: 'Elsewhere' },
    LineItems: [{ Description: 'Item', Quantity: 1, UnitAmount: 1 }],
    Date: '2026-11-29',
    CurrencyCode: 'NZD',
  };
}

async function accessToken(db: Database, grantId: string): Promise<string> {
  const { accessTokens } = await import('../src/app/connections/grants.js');
  const [version] = (
    (await db.execute(sql`SELECT token_version FROM xero_grants WHERE id = ${grantId}`)) as unknown as {
      rows: { token_version: number }[];
    }
  ).rows;
  const tokens = await accessTokens(
    db,
    box,
    new AccessTokenCache(),
    new Map([[grantId, version?.token_version ?? 1]]),
  );
  return tokens.get(grantId) as string;
}
