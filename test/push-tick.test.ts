// The push tick's per-push path: access tokens decrypted once per token version, one lane per tenant
// (Xero's 5 in flight, no tenant waiting behind another), claims that skip a tenant whose minute is
// used up, and the batch settle fenced on the lease. Real Postgres, the Xero sandbox for Xero.

import type { SecretBox } from '@honest-health/platform/crypto';
import type { DatabaseHandle } from '@honest-health/platform/db';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { AccessTokenCache } from '../src/app/connections/grants.js';
import { refreshExpiringTokens } from '../src/app/connections/refresh-tokens.js';
import { subWindows, XERO_BUDGET } from '../src/app/push/budget.js';
import { claimPushes } from '../src/app/push/claim.js';
import { settlePushes } from '../src/app/push/settle.js';
import { KEY_RESEND_WITHIN_MS, type PushTickDeps, pushDueInvoices } from '../src/app/push/tick.js';
import { createXeroClient, type XeroClient } from '../src/app/xero/client.js';
import { freshDatabase } from './support/databases.js';
import { type Cluster, startCluster } from './support/postgres.js';
import {
  captureLog,
  connectedOrganization,
  openDatabase,
  pushRow,
  pushTickDeps,
  queuePush,
  type Sandbox,
  testBox,
  xeroConfigFor,
} from './support/ticks.js';

let cluster: Cluster;
let sandbox: Sandbox;
let box: SecretBox;
const { log } = captureLog();
const open: DatabaseHandle[] = [];

beforeAll(async () => {
  [cluster, sandbox] = await Promise.all([startCluster(), startXeroSandbox({ port: 0 })]);
  box = await testBox();
});
afterAll(async () => {
  await Promise.all(open.map((h) => h.close()));
  await sandbox?.close();
  await cluster?.remove();
});

/** A database of its own: claims are ordered by due time, so other tests' pushes must not be due here. */
async function database(): Promise<{ url: string; handle: DatabaseHandle }> {
  const url = await freshDatabase(cluster);
  const handle = await openDatabase(url, log);
  open.push(handle);
  return { url, handle };
}

function deps(overrides: Partial<PushTickDeps> = {}): PushTickDeps {
  return pushTickDeps(sandbox, box, log, { tokens: new AccessTokenCache(), ...overrides });
}

/** The sandbox client, with every call's start and its tenant's calls in flight recorded. */
function recordingClient(onCall?: (idempotencyKey: string) => Promise<void>) {
  const inner = createXeroClient(xeroConfigFor(sandbox));
  const starts: string[] = [];
  const inFlight = new Map<string, number>();
  const maxInFlight = new Map<string, number>();
  const xero: XeroClient = {
    ...inner,
    async putInvoice(token, tenantId, key, invoice) {
      starts.push(tenantId);
      const now = (inFlight.get(tenantId) ?? 0) + 1;
      inFlight.set(tenantId, now);
      maxInFlight.set(tenantId, Math.max(now, maxInFlight.get(tenantId) ?? 0));
      try {
        const outcome = await inner.putInvoice(token, tenantId, key, invoice);
        await onCall?.(key);
        return outcome;
      } finally {
        inFlight.set(tenantId, (inFlight.get(tenantId) ?? 1) - 1);
      }
    },
  };
  return { xero, starts, maxInFlight };
}

const queueMany = async (handle: DatabaseHandle, organizationId: string, prefix: string, n: number) => {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push(await queuePush(handle.db, organizationId, `${prefix}-${i}`));
  return ids;
};

describe('push tick, per push', () => {
  it('decrypts an access token once per token version', async () => {
    const { handle } = await database();
    let opens = 0;
    const counting: SecretBox = {
      keyId: box.keyId,
      needsReseal: (sealed) => box.needsReseal(sealed),
      seal: (text, ad) => box.seal(text, ad),
      open: (sealed, ad) => {
        opens += 1;
        return box.open(sealed, ad);
      },
    };
    const { org, grantId, tenantId } = await connectedOrganization(handle.db, box, sandbox, 'Cache Co');
    const run = deps({ box: counting });
    for (const key of ['c-1', 'c-2', 'c-3']) {
      await queuePush(handle.db, org.id, key);
      expect(await pushDueInvoices(handle.db, run)).toMatchObject({ pushed: 1 });
    }
    expect(opens).toBe(1);

    // A refresh saves a new token version: the next push decrypts (and sends) the new token.
    await handle.db.execute(
      sql`UPDATE xero_grants SET access_expires_at = now() + interval '5 minutes', refresh_token_issued_at = now() - interval '8 days' WHERE id = ${grantId}`,
    );
    const refreshed = await refreshExpiringTokens(handle.db, {
      xero: createXeroClient(xeroConfigFor(sandbox)),
      box,
      owner: 'replica-a',
      refreshWithinMs: 10 * 60_000,
      leaseMs: 60_000,
      batchSize: 50,
      log,
    });
    expect(refreshed.refreshed).toBe(1);
    await queuePush(handle.db, org.id, 'c-4');
    expect(await pushDueInvoices(handle.db, run)).toMatchObject({ pushed: 1 });
    expect(opens).toBe(2);
    expect(sandbox.state.statsSnapshot().invoicesCreated[tenantId]).toBe(4);
  });

  it("logs each run's summary with its token-cache hits and misses; an empty run logs none", async () => {
    const { handle } = await database();
    const { org } = await connectedOrganization(handle.db, box, sandbox, 'Counted Co');
    const { log: runLog, lines } = captureLog();
    const tokens = new AccessTokenCache();
    const shared = deps({ tokens, log: runLog });
    for (const key of ['n-1', 'n-2', 'n-3']) {
      await queuePush(handle.db, org.id, key);
      await pushDueInvoices(handle.db, shared);
    }
    await pushDueInvoices(handle.db, shared); // nothing due
    // Without a cache kept from run to run (the Worker's per-request ticks), every run misses.
    await queuePush(handle.db, org.id, 'n-4');
    await pushDueInvoices(handle.db, deps({ tokens: undefined, log: runLog }));
    const summaries = lines.filter((l) => l.msg === 'push tick done');
    expect(summaries.map((l) => [l.pushed, l.token_cache_hits, l.token_cache_misses])).toEqual([
      [1, 0, 1],
      [1, 1, 0],
      [1, 1, 0],
      [1, 0, 1],
    ]);
    expect(summaries[0]).toMatchObject({ level: 'info', claimed: 1, retrying: 0, dead: 0, deferred: 0 });
    expect({ hits: tokens.hits, misses: tokens.misses }).toEqual({ hits: 2, misses: 1 });
  });

  it('keeps a tenant to 5 calls in flight without making other tenants wait behind it', async () => {
    const { handle } = await database();
    const busy = await connectedOrganization(handle.db, box, sandbox, 'Busy Co');
    const quiet = await connectedOrganization(handle.db, box, sandbox, 'Quiet Co');
    // The busy tenant's 40 pushes are older than the quiet one's: claimed first, queued first.
    await queueMany(handle, busy.org.id, 'busy', 40);
    await queuePush(handle.db, quiet.org.id, 'quiet-1');
    const { xero, starts, maxInFlight } = recordingClient();
    // Calls that take a while, so a tenant's slots really fill up (the sandbox answers 429 beyond 5).
    const latencyBefore = sandbox.state.limiter.limits.latencyMs;
    sandbox.state.setLimits({ latencyMs: 20 });
    try {
      // The shared budget gives the busy tenant its 5 slots and the quiet one its push, in one claim.
      const result = await pushDueInvoices(handle.db, deps({ xero }));
      expect(result).toMatchObject({ claimed: 6, pushed: 6, retrying: 0, deferred: 0 });
    } finally {
      sandbox.state.setLimits({ latencyMs: latencyBefore });
    }
    expect(maxInFlight.get(busy.tenantId)).toBe(5);
    // The quiet tenant's push went out with the busy tenant's first five, not after its 40.
    expect(starts.indexOf(quiet.tenantId)).toBeLessThan(6);
    expect(sandbox.state.statsSnapshot().invoicesCreated[busy.tenantId]).toBe(5);
  });

  it('leaves a tenant whose minute is used up unclaimed (no attempt spent), and claims other tenants', async () => {
    const { url, handle } = await database();
    const full = await connectedOrganization(handle.db, box, sandbox, 'Full Minute Co');
    const other = await connectedOrganization(handle.db, box, sandbox, 'Other Co');
    const fullIds = await queueMany(handle, full.org.id, 'full', 5);
    const run = deps({ budget: { ...XERO_BUDGET, perMinute: 2 }, batchSize: 3 });

    // The tenant's minute allows two: two claimed and sent, the other three not even claimed.
    expect(await pushDueInvoices(handle.db, run)).toMatchObject({ claimed: 2, pushed: 2, deferred: 0 });
    for (const id of fullIds.slice(2))
      expect(await pushRow(url, id)).toMatchObject({ status: 'queued', attempts: 0, lease_owner: null });

    // The next claim passes over the tenant's due pushes (older) to the other tenant's.
    const otherId = await queuePush(handle.db, other.org.id, 'other-1');
    expect(await pushDueInvoices(handle.db, run)).toMatchObject({ claimed: 1, pushed: 1 });
    expect(await pushRow(url, otherId)).toMatchObject({ status: 'pushed' });
    expect(await pushDueInvoices(handle.db, run)).toMatchObject({ claimed: 0 });
  });

  it('gives up on a call that hangs: a timeout is a transient failure, retried later', async () => {
    const { url, handle } = await database();
    const { org, tenantId } = await connectedOrganization(handle.db, box, sandbox, 'Hanging Co');
    const id = await queuePush(handle.db, org.id, 'hang-1');
    sandbox.state.faults.add({ target: 'invoices', kind: 'hang', count: 1, hangMs: 30_000 });
    const xero = createXeroClient({ ...xeroConfigFor(sandbox), timeoutMs: 300 });
    expect(await pushDueInvoices(handle.db, deps({ xero }))).toMatchObject({ retrying: 1 });
    const row = await pushRow(url, id);
    expect(row).toMatchObject({ status: 'failed', attempts: 1, last_error: 'timeout', lease_owner: null });
    expect(new Date(row.next_attempt_at).getTime()).toBeGreaterThan(Date.now() + 10_000);
    expect(sandbox.state.statsSnapshot().invoicesCreated[tenantId] ?? 0).toBe(0);
  });

  it('does not settle a push whose lease another replica took over meanwhile', async () => {
    const { url, handle } = await database();
    const { org, tenantId } = await connectedOrganization(handle.db, box, sandbox, 'Taken Over Co');
    const [kept, taken] = await queueMany(handle, org.id, 'lease', 2);
    const client = new pg.Client(url);
    await client.connect();
    try {
      // Our lease on `taken` expires while Xero answers, and replica-b claims it.
      const { xero } = recordingClient(async (key) => {
        if (key === taken)
          await client.query(
            `UPDATE invoice_pushes SET lease_owner = 'replica-b', attempts = attempts + 1 WHERE id = $1`,
            [key],
          );
      });
      expect(await pushDueInvoices(handle.db, deps({ xero }))).toMatchObject({ claimed: 2, pushed: 2 });
    } finally {
      await client.end();
    }
    expect(await pushRow(url, kept as string)).toMatchObject({ status: 'pushed', lease_owner: null });
    // Left to replica-b, which will get Xero's replay of the same invoice under the same key.
    expect(await pushRow(url, taken as string)).toMatchObject({
      status: 'queued',
      lease_owner: 'replica-b',
      xero_invoice_id: null,
    });
    expect(sandbox.state.statsSnapshot().invoicesCreated[tenantId]).toBe(2);
  });
});

describe('a claim returns what it sends', () => {
  /** An invoice of about `kib` KiB: long line descriptions. */
  const bigInvoice = (kib: number) => ({
    contact: { name: 'Big Customer' },
    lineItems: Array.from({ length: kib }, (_, i) => ({
      description: `${i}:${'x'.repeat(1000)}`,
      quantity: '1',
      unitAmount: '1.00',
    })),
    date: '2026-11-29',
    currency: 'NZD',
  });
  const bytesOf = (payload: unknown) => Buffer.byteLength(JSON.stringify(payload));

  it('bounds the payload bytes a claim returns (big invoices: fewer claimed), and puts back ids without payloads', async () => {
    const { url, handle } = await database();
    // Four tenants with 3 invoices of ~200 KiB each: 12 sends, 2.4 MiB, against a bound of 1 MiB.
    const tenants = await Promise.all(
      [1, 2, 3, 4].map((i) => connectedOrganization(handle.db, box, sandbox, `Big Co ${i}`)),
    );
    for (const [i, t] of tenants.entries())
      for (let n = 0; n < 3; n++) await queuePush(handle.db, t.org.id, `big-${i}-${n}`, bigInvoice(200));
    // Put-backs: a tenant whose token is about to expire, and a push with no connection.
    const stale = await connectedOrganization(handle.db, box, sandbox, 'Stale Token Co');
    const staleIds = [
      await queuePush(handle.db, stale.org.id, 'stale-1', bigInvoice(200)),
      await queuePush(handle.db, stale.org.id, 'stale-2', bigInvoice(200)),
    ];
    await handle.db.execute(
      sql`UPDATE xero_grants SET access_expires_at = now() WHERE id = ${stale.grantId}`,
    );
    const orphan = await queuePush(handle.db, stale.org.id, 'orphan-1', bigInvoice(200));
    await handle.db.execute(sql`UPDATE invoice_pushes SET connection_id = NULL WHERE id = ${orphan}`);

    const bound = 1024 * 1024;
    const claim = await claimPushes(handle.db, {
      owner: 'replica-a',
      leaseMs: 60_000,
      batchSize: 50,
      budget: XERO_BUDGET,
      maxPayloadBytes: bound,
      sends: { markerPrefix: 'https://example.com/api/invoices/', resendWithinMs: KEY_RESEND_WITHIN_MS },
    });
    const sends = claim.pushes.filter((p) => p.marked);
    const putBacks = claim.pushes.filter((p) => !p.marked);
    // A tick of big invoices claims fewer sends: as many as the bound holds, and at least one.
    expect(sends.length).toBeGreaterThan(0);
    expect(sends.length).toBeLessThan(12);
    expect(sends.reduce((n, p) => n + bytesOf(p.payload), 0)).toBeLessThanOrEqual(bound);
    for (const p of sends) expect(bytesOf(p.payload)).toBeGreaterThan(200_000);
    // The put-backs are claimed (their lease written) as ids, with no payload.
    expect(putBacks.map((p) => p.id).sort()).toEqual([...staleIds, orphan].sort());
    for (const p of putBacks) expect(p.payload ?? null).toBeNull();
    // What the bound left is not leased, and has spent no attempt.
    const { rows } = await handle.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM invoice_pushes WHERE lease_owner IS NULL AND attempts = 0 AND status = 'queued'`,
    );
    expect(rows[0]?.n).toBe(12 - sends.length);
    const granted = claim.grants.reduce((n, g) => n + g.granted, 0);
    expect(granted).toBeGreaterThanOrEqual(sends.length);
    await settlePushes(
      handle.db,
      'replica-a',
      claim.pushes.map((p) => ({ id: p.id, attempts: p.attempts - 1, retryInMs: 0, key: 'unsent' as const })),
      claim.grants,
      new Map(),
    );

    // The tick drains them all over several runs, each within the bound.
    const run = deps({ maxPayloadBytes: bound });
    await handle.db.execute(sql`UPDATE xero_grants SET access_expires_at = now() + interval '1 hour'`);
    let pushed = 0;
    for (let i = 0; i < 20 && pushed < 15; i++) pushed += (await pushDueInvoices(handle.db, run)).pushed;
    expect(pushed).toBe(14);
    expect(await pushRow(url, orphan)).toMatchObject({ status: 'awaiting_connection' });
  });
});

describe('claimers side by side', () => {
  const claimWith = (db: DatabaseHandle['db'], owner: string, budget = XERO_BUDGET, batchSize = 50) =>
    claimPushes(db, {
      owner,
      leaseMs: 60_000,
      batchSize,
      budget,
      sends: { markerPrefix: 'https://example.com/api/invoices/', resendWithinMs: KEY_RESEND_WITHIN_MS },
    });

  it('a claim passes over the tenants another holds, never waiting for them', async () => {
    const { url, handle } = await database();
    const tenants = await Promise.all(
      [1, 2, 3, 4].map((i) => connectedOrganization(handle.db, box, sandbox, `Side Co ${i}`)),
    );
    for (const [i, t] of tenants.entries()) await queueMany(handle, t.org.id, `side-${i}`, 5);
    // Another claim (or a settle) holds the first two tenants' rows until it commits.
    const other = new pg.Client(url);
    await other.connect();
    // This claim gives up on any lock it waits a second for: it must wait for none.
    const impatient = new pg.Pool({ connectionString: url, max: 1, options: '-c lock_timeout=1000' });
    try {
      await other.query('BEGIN');
      await other.query('SELECT id FROM xero_connections WHERE id = ANY($1::uuid[]) FOR UPDATE', [
        tenants.slice(0, 2).map((t) => t.connectionId),
      ]);
      const claim = await claimWith(drizzle({ client: impatient }), 'run-b');
      expect(new Set(claim.pushes.map((p) => p.connection_id))).toEqual(
        new Set(tenants.slice(2).map((t) => t.connectionId)),
      );
      expect(claim.pushes).toHaveLength(10);
      await other.query('COMMIT');
      // Once they are let go, the next claim serves them.
      const next = await claimWith(handle.db, 'run-c');
      expect(new Set(next.pushes.map((p) => p.connection_id))).toEqual(
        new Set(tenants.slice(0, 2).map((t) => t.connectionId)),
      );
    } finally {
      await other.end();
      await impatient.end();
    }
  });

  it("never spends more of the app's minute than is left when another claim spent it meanwhile", async () => {
    const { url, handle } = await database();
    const t = await connectedOrganization(handle.db, box, sandbox, 'App Minute Co');
    await queueMany(handle, t.org.id, 'app-minute', 5);
    const budget = { ...XERO_BUDGET, appPerMinute: 1000 };
    const minute = subWindows(budget, 'minute');
    const other = new pg.Client(url);
    await other.connect();
    try {
      // Another claim, not yet committed, counts 998 calls of the app's 1,000: this claim's snapshot
      // shows the minute empty, so it does not lock the app row first.
      await other.query('BEGIN');
      await other.query(
        `UPDATE xero_app_limits SET budget_minute_counts = array_fill(0, ARRAY[${minute.n - 1}]) || 998,
           budget_minute_at = floor(extract(epoch FROM now()) * 1000 / ${minute.subMs})::bigint WHERE id = 'app'`,
      );
      const claiming = claimWith(handle.db, 'run-b', budget, 10);
      // It runs to its last write, the app's minute, and waits there for the other to commit.
      for (let waiting = false; !waiting; ) {
        // Inside a transaction pg_stat_activity is read once and kept: clear it so each poll is fresh.
        await other.query('SELECT pg_stat_clear_snapshot()');
        const { rows } = await other.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE '/* push claim%' AND wait_event_type = 'Lock'`,
        );
        waiting = (rows[0]?.n ?? 0) > 0;
      }
      await other.query('COMMIT');
      // Its count would make 998 + 5: the statement fails and it claims again, with the app row locked
      // first, and gets the 2 left.
      const claim = await claiming;
      expect(claim.pushes).toHaveLength(2);
      const { rows } = await other.query<{ used: number }>(
        `SELECT (SELECT sum(x) FROM unnest(budget_minute_counts) x)::int AS used FROM xero_app_limits WHERE id = 'app'`,
      );
      expect(rows[0]?.used).toBe(1000);
    } finally {
      await other.end();
    }
  });
});
