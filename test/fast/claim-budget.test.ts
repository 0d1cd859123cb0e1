// The claim's budget arithmetic (src/app/push/claim.ts), one SQL statement, on the embedded database:
// a tenant gets what its row allows (5 in flight, 60 a rolling minute), the slots it holds are not
// handed out again, and one tenant's spent budget never holds up another. The same claim across
// replicas, Neon's HTTP driver and a real Xero sandbox is tested in test/xero-budget.test.ts.

import type { Database } from '@honest-health/platform';
import { createSecretBox } from '@honest-health/platform/crypto';
import { type SQL, sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { saveGrant } from '../../src/app/connections/grants.js';
import { dueGrantsQuery, type RefreshTickDeps } from '../../src/app/connections/refresh-tokens.js';
import { createOrganization } from '../../src/app/organizations.js';
import { XERO_BUDGET } from '../../src/app/push/budget.js';
import { type ClaimOptions, claimPushes, tenantsVisited } from '../../src/app/push/claim.js';
import { rowsOf } from '../../src/app/push/rows.js';
import { type InProcessApp, startInProcess } from '../support/in-process.js';
import { invoiceBody } from '../support/orgs.js';
import { TEST_TOKEN_KEY } from '../support/server.js';

let app: InProcessApp;
beforeAll(async () => {
  app = await startInProcess();
});
afterAll(async () => {
  await app?.close();
});
// Each test starts from no organizations, no grants and an unspent app minute.
beforeEach(async () => {
  await app.database.pool.query('TRUNCATE organizations, xero_grants CASCADE');
  await app.database.pool.query(
    "UPDATE xero_app_limits SET budget_minute = '{}', budget_minute_counts = '{}', budget_minute_at = NULL, paused_until = NULL",
  );
});

/** An organization connected to one tenant, with `n` invoices queued through the API. */
async function tenantWithQueue(name: string, n: number): Promise<{ connectionId: string }> {
  const org = await createOrganization(app.database.db, name);
  await app.reloadIndexes();
  const saved = await saveGrant(app.database.db, await createSecretBox(TEST_TOKEN_KEY), {
    organizationId: org.id,
    authEventId: null,
    scope: 'offline_access accounting.invoices',
    tokens: { accessToken: 'access', refreshToken: 'refresh', expiresAt: new Date(Date.now() + 1_800_000) },
    tenants: [{ tenantId: crypto.randomUUID(), tenantName: name, connectionId: null, authEventId: null }],
  });
  // The organization chooses it as its default (a new connection receives nothing until then).
  const chosen = await app.request(`/api/connections/${saved.connected[0]?.id}/default`, {
    method: 'POST',
    headers: { authorization: `Bearer ${org.apiKey}` },
  });
  expect(chosen.status).toBe(200);
  for (let i = 0; i < n; i++) {
    const res = await app.request('/api/invoices', {
      method: 'POST',
      headers: {
        authorization: `Bearer ${org.apiKey}`,
        'content-type': 'application/json',
        'idempotency-key': `${org.id}-${i}`,
      },
      body: JSON.stringify(invoiceBody()),
    });
    expect(await res.json()).toMatchObject({ status: 'queued' });
  }
  return { connectionId: saved.connected[0]?.id as string };
}

const claim = (owner: string, budget = XERO_BUDGET, batchSize = 100) =>
  claimPushes(app.database.db, { owner, leaseMs: 60_000, batchSize, budget } satisfies ClaimOptions);
const perConnection = (pushes: { connection_id: string | null }[], id: string) =>
  pushes.filter((p) => p.connection_id === id).length;

describe('the claim on the embedded database', () => {
  it('grants a tenant its 5 in-flight slots and no more, and another owner none while they are held', async () => {
    const { connectionId } = await tenantWithQueue('Five Ltd', 8);
    const first = await claim('replica-a');
    expect(perConnection(first.pushes, connectionId)).toBe(5);
    expect(first.grants.find((g) => g.connectionId === connectionId)?.granted).toBe(5);
    const second = await claim('replica-b');
    expect(perConnection(second.pushes, connectionId)).toBe(0);
    expect(second.grants.find((g) => g.connectionId === connectionId)).toBeUndefined();
  });

  it("stops at the rolling minute's count, and leaves other tenants their own budget", async () => {
    const budget = { ...XERO_BUDGET, perMinute: 3 };
    const spent = await tenantWithQueue('Minute Ltd', 4);
    const other = await tenantWithQueue('Other Minute Ltd', 2);
    const first = await claim('replica-a', budget);
    expect(perConnection(first.pushes, spent.connectionId)).toBe(3);
    expect(perConnection(first.pushes, other.connectionId)).toBe(2);
    // Nothing settled: the minute holds 3 calls, so the fourth push waits for the window to move on.
    const again = await claim('replica-b', { ...budget, concurrent: 100 });
    expect(perConnection(again.pushes, spent.connectionId)).toBe(0);
  });

  it('serves tenants least recently served first, each up to its room, and the next claim the others', async () => {
    const a = await tenantWithQueue('Share A', 5);
    const b = await tenantWithQueue('Share B', 5);
    // Neither was ever served: the first by id takes the whole small batch (its room is 5).
    const first = await claim('replica-c', XERO_BUDGET, 4);
    expect(first.pushes).toHaveLength(4);
    const [served, other] = perConnection(first.pushes, a.connectionId) === 4 ? [a, b] : [b, a];
    expect(perConnection(first.pushes, other.connectionId)).toBe(0);
    // The other was never served, so it goes first now, though the first still has room for 1.
    const second = await claim('replica-c', XERO_BUDGET, 4);
    expect(perConnection(second.pushes, other.connectionId)).toBe(4);
    expect(perConnection(second.pushes, served.connectionId)).toBe(0);
    // Then the first again, with what its slots allow: 1 (4 of its 5 are held).
    const third = await claim('replica-c', XERO_BUDGET, 4);
    expect(perConnection(third.pushes, served.connectionId)).toBe(1);
    expect(perConnection(third.pushes, other.connectionId)).toBe(1);
  });

  it('shares a small batch only among tenants with room: a tenant whose 5 slots are held takes no share', async () => {
    const busy = await tenantWithQueue('Busy Ltd', 8);
    expect(perConnection((await claim('replica-a')).pushes, busy.connectionId)).toBe(5);
    const idle = await tenantWithQueue('Idle Ltd', 5);
    // Busy still has 3 due but no slot free: the whole batch of 4 goes to Idle.
    const next = await claim('replica-b', XERO_BUDGET, 4);
    expect(perConnection(next.pushes, busy.connectionId)).toBe(0);
    expect(perConnection(next.pushes, idle.connectionId)).toBe(4);
  });
});

interface PlanNode {
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

/** What one claim reads, per table: the rows its scans returned or filtered out (EXPLAIN ANALYZE). */
async function rowsRead(owner: string): Promise<Record<string, number>> {
  const plan = await claimPlan(owner);
  return plan ? rowsPerTable(plan) : {};
}

/** One claim's plan as it ran (EXPLAIN ANALYZE), from a fixed start for the walk over tenants. */
async function claimPlan(owner: string): Promise<PlanNode | undefined> {
  let plan: PlanNode | undefined;
  const explaining = {
    execute: async (query: SQL) => {
      const rows = rowsOf<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(
        await app.database.db.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${query}`),
      );
      plan = rows[0]?.['QUERY PLAN'][0]?.Plan;
      return { rows: [] };
    },
  } as unknown as Database;
  // A fixed start for the walk over tenants, so that both claims take the same path.
  const from = '00000000-0000-4000-8000-000000000000';
  await claimPushes(explaining, { owner, leaseMs: 60_000, batchSize: 100, budget: XERO_BUDGET, from });
  return plan;
}

/** The indexes a plan's scans read (those that ran). */
function indexesOf(plan: PlanNode): Set<string> {
  const names = new Set<string>();
  const walk = (node: PlanNode) => {
    if (node['Index Name'] !== undefined && (node['Actual Loops'] ?? 0) > 0) names.add(node['Index Name']);
    for (const child of node.Plans ?? []) walk(child);
  };
  walk(plan);
  return names;
}

/** The rows a plan's scans returned or filtered out, per table. */
function rowsPerTable(plan: PlanNode): Record<string, number> {
  const read: Record<string, number> = {};
  const walk = (node: PlanNode) => {
    const table = node['Relation Name'];
    if (table !== undefined) {
      const rows = (node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0);
      read[table] = (read[table] ?? 0) + rows * (node['Actual Loops'] ?? 1);
    }
    for (const child of node.Plans ?? []) walk(child);
  };
  walk(plan);
  return read;
}

/** What the refresh tick's choice of grants reads, per table (EXPLAIN ANALYZE of dueGrantsQuery). */
async function refreshRowsRead(): Promise<Record<string, number>> {
  const query = dueGrantsQuery(app.database.db, {
    owner: 'refresher',
    refreshWithinMs: 600_000,
    batchSize: 10,
  } as RefreshTickDeps).toSQL();
  const { rows } = await app.database.pool.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(
    `EXPLAIN (ANALYZE, FORMAT JSON) ${query.sql}`,
    query.params,
  );
  const plan = rows[0]?.['QUERY PLAN'][0]?.Plan;
  return plan ? rowsPerTable(plan) : {};
}

/** `n` more tenants of `connectionId`'s organization and grant, named `${prefix}1` to `${prefix}n`. */
async function moreTenants(connectionId: string, n: number, prefix: string): Promise<void> {
  await app.database.pool.query(
    `INSERT INTO xero_connections (organization_id, grant_id, tenant_id)
     SELECT c.organization_id, c.grant_id, $2 || i FROM xero_connections c, generate_series(1, $3::int) AS i
     WHERE c.id = $1`,
    [connectionId, prefix, n],
  );
}

/** Queues `each` due pushes for every tenant whose tenant_id starts with `prefix` (moreTenants'). */
async function queueEach(prefix: string, each: number): Promise<void> {
  await app.database.pool.query(
    `INSERT INTO invoice_pushes (organization_id, connection_id, idempotency_key, request_hash, payload, status)
     SELECT c.organization_id, c.id, c.tenant_id || '-' || k, 'test', '{}'::jsonb, 'queued'
     FROM xero_connections c, generate_series(1, $2::int) AS k WHERE c.tenant_id LIKE $1 || '%'`,
    [prefix, each],
  );
}

/** Gives back what a claim took, so the next claim starts from the same state. */
async function unclaim(): Promise<void> {
  await app.database.pool.query(
    'UPDATE invoice_pushes SET lease_owner = NULL, lease_expires_at = NULL, attempts = 0',
  );
  await app.database.pool.query(
    `UPDATE xero_connections SET budget_slots = '{}', budget_minute_counts = '{}', budget_minute_at = NULL,
       budget_served_at = NULL`,
  );
  await app.database.pool.query(
    "UPDATE xero_app_limits SET budget_minute_counts = '{}', budget_minute_at = NULL",
  );
}

/** `n` idle tenants beside `connectionId`: connected and sendable, windows full, 4 settled pushes each. */
async function idleTenants(connectionId: string, n: number, prefix: string): Promise<void> {
  await app.database.pool.query(
    `INSERT INTO xero_connections (organization_id, grant_id, tenant_id, budget_day_counts, budget_day_at,
                                   budget_minute_counts, budget_minute_at)
     SELECT c.organization_id, c.grant_id, $2 || i, array_fill(200, ARRAY[26]),
            floor(extract(epoch FROM now()) / 3600)::bigint, array_fill(1, ARRAY[63]), floor(extract(epoch FROM now()))::bigint
     FROM xero_connections c, generate_series(1, $3::int) AS i WHERE c.id = $1`,
    [connectionId, prefix, n],
  );
  await app.database.pool.query(
    `INSERT INTO invoice_pushes (organization_id, connection_id, idempotency_key, request_hash, payload, status)
     SELECT c.organization_id, c.id, c.tenant_id || '-' || k, 'test', '{}'::jsonb,
            CASE WHEN k = 4 THEN 'dead' ELSE 'pushed' END
     FROM xero_connections c, generate_series(1, 4) AS k WHERE c.tenant_id LIKE $1 || '%'`,
    [prefix],
  );
  await app.database.pool.query('ANALYZE');
}

describe("the claim's cost", () => {
  it('reads the same rows beside 300 idle tenants as beside 900 (full windows, settled history)', async () => {
    const a = await tenantWithQueue('Backlog A', 6);
    await tenantWithQueue('Backlog B', 6);
    await idleTenants(a.connectionId, 300, 'idle-');
    const before = await rowsRead('replica-a');
    // A handful per claimed tenant (found, granted, joined to its claimed pushes), not one per connection.
    expect(before.xero_connections).toBeLessThan(20);
    await unclaim();

    await idleTenants(a.connectionId, 600, 'more-idle-');
    // The backlog tenants' own day windows 4,000 calls full: their counters are as many as when empty.
    await app.database.pool.query(
      `UPDATE xero_connections SET budget_day_counts = array_fill(0, ARRAY[25]) || 4000,
         budget_day_at = floor(extract(epoch FROM now()) / 3600)::bigint WHERE tenant_id NOT LIKE '%idle-%'`,
    );
    expect(await rowsRead('replica-b')).toEqual(before);
  });
});

describe("a tenant's history", () => {
  it('does not change what a claim reads: before statistics, and beside 10,000 settled pushes a tenant', async () => {
    const a = await tenantWithQueue('History A', 0);
    await moreTenants(a.connectionId, 19, 'history-');
    // 20 tenants, queued one after another (as a bulk upload per tenant queues them), in an order
    // unrelated to their ids (a fixed permutation of their ranks, so that every run has the same
    // statistics): in next_attempt_at order a tenant's pushes follow the others', not spread among them.
    const queue = (status: string, each: number, key: string) =>
      app.database.pool.query(
        `INSERT INTO invoice_pushes (organization_id, connection_id, idempotency_key, request_hash, payload,
                                     status, next_attempt_at)
         SELECT c.organization_id, c.id, c.id || '-${key}-' || k, 'test', '{}'::jsonb, $1,
                now() - interval '1 hour' + (c.n * $2 + k) * interval '1 millisecond'
         FROM (SELECT id, organization_id, (row_number() OVER (ORDER BY id) * 7) % 20 AS n FROM xero_connections) c,
              generate_series(1, $2::int) AS k
         ORDER BY c.n, k`,
        [status, each],
      );
    // A grant of its own whose one tenant has a history and nothing due: the refresh tick asks it.
    const idle = await tenantWithQueue('History idle', 0);
    await queue('queued', 500, 'due');
    // Before any ANALYZE has seen the rows (a bulk upload before autovacuum comes round).
    const fresh = await rowsRead('replica-a');
    await unclaim();
    // With the foreign keys' triggers off for the seed: what its rows reference exists, and looking up
    // the same few rows 210,000 times would only slow it down.
    await app.database.pool.query('SET session_replication_role = replica');
    await queue('pushed', 10_000, 'history');
    await app.database.pool.query('RESET session_replication_role');
    await app.database.pool.query(
      `UPDATE invoice_pushes SET status = 'pushed' WHERE connection_id = $1 AND status = 'queued'`,
      [idle.connectionId],
    );
    // Statistics from every row, not a sample: the same plan on every run.
    await app.database.pool.query('SET default_statistics_target = 1000');
    await app.database.pool.query('ANALYZE invoice_pushes');
    await app.database.pool.query('RESET default_statistics_target');
    const beside = await rowsRead('replica-b');
    // 100 claimed of 20 tenants: a few rows per push. With `connection_id = tenant` the planner walked
    // invoice_pushes_due_idx through the other tenants' due pushes: 70,401 rows here.
    const freshRows = fresh.invoice_pushes ?? Number.NaN;
    expect(freshRows).toBeLessThan(1000);
    expect(beside.invoice_pushes).toBeLessThan(freshRows * 1.1);

    // The refresh tick's choice of grants whose access token expires with a push due: for the idle
    // grant's tenant a probe of its own due range, not a scan of every pending push.
    await app.database.pool.query(`UPDATE xero_grants SET access_expires_at = now() + interval '1 minute'`);
    expect((await refreshRowsRead()).invoice_pushes ?? 0).toBeLessThan(50);
  }, 60_000);
});

describe('settled pushes, which let go of their connection', () => {
  it("are not read for the claim's pushes without a connection, however many are due", async () => {
    const a = await tenantWithQueue('Orphan A', 0);
    await moreTenants(a.connectionId, 19, 'orphan-');
    // 9,500 due pushes over 19 tenants, and 60,000 settled ones as the settle leaves them: pushed,
    // with no connection. Statistics then say most pushes have none.
    await queueEach('orphan-', 500);
    await app.database.pool.query('SET session_replication_role = replica');
    await app.database.pool.query(
      `INSERT INTO invoice_pushes (organization_id, idempotency_key, request_hash, payload, status)
       SELECT c.organization_id, 'settled-orphan-' || k, 'test', '{}'::jsonb, 'pushed'
       FROM xero_connections c, generate_series(1, 60000) AS k WHERE c.id = $1`,
      [a.connectionId],
    );
    await app.database.pool.query('RESET session_replication_role');
    await app.database.pool.query('ANALYZE invoice_pushes');
    const read = await rowsRead('replica-a');
    // Walked in next_attempt_at order, the due pushes without a connection (none here) were looked for
    // among every due push, this file's others included: 10,000 rows read and filtered out, a claim.
    expect(read.invoice_pushes).toBeLessThan(2000);
    await unclaim();
  }, 60_000);
});

describe('the walk over tenants with open pushes', () => {
  it("probes the open pushes' own index, where a settled push leaves no entry to step over", async () => {
    const a = await tenantWithQueue('Walk A', 0);
    await moreTenants(a.connectionId, 19, 'walk-');
    await app.database.pool.query(
      `INSERT INTO invoice_pushes (organization_id, connection_id, idempotency_key, request_hash, payload,
                                   status, next_attempt_at)
       SELECT c.organization_id, c.id, c.id || '-walk-' || k, 'test', '{}'::jsonb, 'queued',
              now() - interval '1 hour' + k * interval '1 millisecond'
       FROM xero_connections c, generate_series(1, 50) AS k`,
    );
    // Statistics from when every push was open (as when a backlog arrives), then most of each
    // tenant's pushes settled, as the settle leaves them: pushed, without the connection.
    await app.database.pool.query('ANALYZE invoice_pushes');
    await app.database.pool.query(
      `UPDATE invoice_pushes SET status = 'pushed', connection_id = NULL
       WHERE split_part(idempotency_key, '-walk-', 2)::int <= 45`,
    );
    const plan = await claimPlan('walker');
    if (!plan) throw new Error('no plan');
    // invoice_pushes_connection_idx (every push that references a connection) keeps a connection's
    // entries in one posting list, and an entry whose rows are not all dead is never marked dead, so a
    // probe there visits the settled rows' old versions one by one.
    expect([...indexesOf(plan)]).not.toContain('invoice_pushes_connection_idx');
    expect([...indexesOf(plan)]).toContain('invoice_pushes_connection_due_idx');
  });
});

describe("the claim's lease write", () => {
  it('is a HOT update, even among pushes queued in bulk (full pages at the default fillfactor)', async () => {
    const { connectionId } = await tenantWithQueue('Hot', 0);
    await app.database.pool.query(
      `INSERT INTO invoice_pushes (organization_id, connection_id, idempotency_key, request_hash, payload,
                                   status, next_attempt_at)
       SELECT c.organization_id, c.id, 'hot-' || k, 'test', '{"contact":{"name":"Customer"}}'::jsonb, 'queued',
              now() - interval '1 hour' + k * interval '1 millisecond'
       FROM xero_connections c, generate_series(1, 400) AS k WHERE c.id = $1`,
      [connectionId],
    );
    const updates = async () => {
      // Flushed at the end of this statement's transaction, read by the next one.
      await app.database.pool.query('SELECT pg_stat_force_next_flush()');
      const { rows } = await app.database.pool.query<{ upd: string; hot: string }>(
        `SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE relname = 'invoice_pushes'`,
      );
      return { upd: Number(rows[0]?.upd), hot: Number(rows[0]?.hot) };
    };
    const before = await updates();
    const { pushes } = await claimPushes(app.database.db, {
      owner: 'hot',
      leaseMs: 60_000,
      batchSize: 5,
      budget: XERO_BUDGET,
      sends: { markerPrefix: 'https://example.com/invoices/', resendWithinMs: 300_000 },
    });
    expect(pushes).toHaveLength(5);
    const after = await updates();
    expect({ updated: after.upd - before.upd, hot: after.hot - before.hot }).toEqual({ updated: 5, hot: 5 });
  });
});

describe('many tenants with work', () => {
  it('a claim stops looking at tenants once those it found could fill its batch twice over', async () => {
    const a = await tenantWithQueue('Backlog A', 10);
    // 59 more tenants with 10 due pushes each: 600 due, 5 a tenant can take at once.
    await moreTenants(a.connectionId, 59, 'backlog-');
    await queueEach('backlog-', 10);
    await app.database.pool.query('ANALYZE');
    // rowsRead claims 100: 200 due pushes found, 5 counted a tenant, is 40 tenants looked at (a few
    // more where this file's other tenants have fewer due), their grants read once each, and 20 served.
    // Looking at every tenant with open pushes read all 60.
    const read = await rowsRead('replica-a');
    expect(read.xero_grants).toBeGreaterThanOrEqual(40);
    expect(read.xero_grants).toBeLessThan(50);
    await unclaim();
  });

  it('a claim looks at a bounded number of them, and every one is reached in turn', async () => {
    const a = await tenantWithQueue('Many A', 1);
    // 299 more tenants with one queued push each: 300 with work, more than a claim looks at.
    await moreTenants(a.connectionId, 299, 'busy-');
    await queueEach('busy-', 1);
    await app.database.pool.query('ANALYZE');
    expect(tenantsVisited(100)).toBe(400);
    expect(tenantsVisited(50)).toBe(200);
    // One push each: a claim of 100 looks at tenants until it has found 200 due pushes (twice the batch),
    // so it fills its batch though no tenant has more than one.
    expect((await claim('replica-a', XERO_BUDGET, 100)).pushes).toHaveLength(100);
    await unclaim();
    // Batches of 25 look at tenants from a random one until they have found 50 pushes they could take:
    // every tenant is reached within a few claims.
    const served = new Set<string>();
    for (let i = 0; i < 40 && served.size < 300; i++) {
      const { pushes } = await claim(`replica-${i}`, XERO_BUDGET, 25);
      expect(pushes.length).toBeLessThanOrEqual(25);
      for (const p of pushes) served.add(p.connection_id as string);
    }
    expect(served.size).toBe(300);
  });
});
