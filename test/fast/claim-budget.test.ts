// The claim's budget arithmetic (src/app/push/claim.ts), one SQL statement, on the embedded database:
// a tenant gets what its row allows (5 in flight, 60 a rolling minute), the slots it holds are not
// handed out again, and one tenant's spent budget never holds up another. The same claim across
// replicas, Neon's HTTP driver and a real Xero sandbox is tested in test/xero-budget.test.ts.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { saveGrant } from '../../src/app/connections/grants.js';
import { createOrganization } from '../../src/app/organizations.js';
import { XERO_BUDGET } from '../../src/app/push/budget.js';
import { type ClaimOptions, claimPushes } from '../../src/app/push/claim.js';
import { createSecretBox } from '../../src/platform/secret-box.js';
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
  await app.database.pool.query("UPDATE xero_app_limits SET budget_minute = '{}', budget_minute_counts = '{}', budget_minute_at = NULL, paused_until = NULL");
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

  it('shares a small batch between tenants rather than giving it all to one', async () => {
    const a = await tenantWithQueue('Share A', 5);
    const b = await tenantWithQueue('Share B', 5);
    const shared = await claim('replica-c', XERO_BUDGET, 4);
    expect(shared.pushes).toHaveLength(4);
    expect(perConnection(shared.pushes, a.connectionId)).toBe(2);
    expect(perConnection(shared.pushes, b.connectionId)).toBe(2);
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
