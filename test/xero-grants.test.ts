// Grants, tenants and Xero's signals against the sandbox and a real Postgres: one refresh per grant,
// per-tenant disconnect, 403 and invalid_client, and each rate-limit signal changing the next claim.

import type { SecretBox } from '@honest-health/platform/crypto';
import type { DatabaseHandle } from '@honest-health/platform/db';
import { sql } from 'drizzle-orm';
import { Hono } from 'hono';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import type { Organization } from '../src/app/api-key-registry.js';
import type { AuthEnv } from '../src/app/auth.js';
import {
  CredentialsState,
  type RefreshTickDeps,
  refreshExpiringTokens,
} from '../src/app/connections/refresh-tokens.js';
import { connectionRoutes } from '../src/app/connections/routes.js';
import { type PushTickDeps, pushDueInvoices } from '../src/app/push/tick.js';
import { createXeroClient } from '../src/app/xero/client.js';
import { migratedDatabase } from './support/databases.js';
import type { Cluster } from './support/postgres.js';
import { sharedCluster } from './support/shared-postgres.js';
import {
  captureLog,
  connectedGrant,
  connectedOrganization,
  openDatabase,
  pushRow,
  pushTickDeps,
  refreshTickDeps,
  type Sandbox,
  testBox,
  xeroConfigFor,
} from './support/ticks.js';
import { until } from './support/until.js';

let cluster: Cluster;
let sandbox: Sandbox;
let url: string;
let handle: DatabaseHandle;
let box: SecretBox;
const { log, lines } = captureLog();

beforeAll(async () => {
  [cluster, sandbox] = await Promise.all([sharedCluster(), startXeroSandbox({ port: 0 })]);
  url = await migratedDatabase(cluster);
  handle = await openDatabase(url, log);
  box = await testBox();
});
afterAll(async () => {
  await handle?.close();
  await sandbox?.close();
  await cluster?.remove();
});
afterEach(async () => {
  // Signals are app-wide state: no test leaves a pause or a parked tenant behind for the next one.
  // (Reset, not deleted: migration 0006 creates the row every claim locks first.)
  await handle.db.execute(
    sql`UPDATE xero_app_limits SET app_min_remaining = NULL, paused_until = NULL, budget_minute = '{}', budget_minute_counts = '{}', budget_minute_at = NULL`,
  );
  await handle.db.execute(
    sql`UPDATE invoice_pushes SET status = 'dead' WHERE status IN ('queued', 'failed')`,
  );
  sandbox.state.faults.clear();
  sandbox.state.setLimits({ perMinute: 60, perDay: 5000, appPerMinute: 10_000, concurrent: 5 });
});

const stats = () => sandbox.state.statsSnapshot();
const created = (tenantId: string) => stats().invoicesCreated[tenantId] ?? 0;

function pushDeps(overrides: Partial<PushTickDeps> = {}): PushTickDeps {
  return pushTickDeps(sandbox, box, log, overrides);
}

function refreshDeps(overrides: Partial<RefreshTickDeps> = {}): RefreshTickDeps {
  return refreshTickDeps(sandbox, box, log, overrides);
}

/** A queued push for one connection (one tenant) of the organization. */
async function queueFor(organizationId: string, connectionId: string, key: string, lineItems?: unknown) {
  const payload = {
    contact: { name: 'Customer' },
    lineItems: lineItems ?? [{ description: 'Widget', quantity: '1', unitAmount: '10.00' }],
    date: '2026-11-29',
    currency: 'NZD',
  };
  const rows = await handle.db.execute<{ id: string }>(sql`
    INSERT INTO invoice_pushes (organization_id, connection_id, idempotency_key, request_hash, payload, status)
    VALUES (${organizationId}, ${connectionId}, ${key}, 'test', ${JSON.stringify(payload)}::jsonb, 'queued')
    RETURNING id`);
  return (rows as unknown as { rows: { id: string }[] }).rows[0]?.id as string;
}

async function query<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return (await client.query(text, params)).rows as T[];
  } finally {
    await client.end();
  }
}

const expireSoon = (grantId: string) =>
  handle.db.execute(
    sql`UPDATE xero_grants SET access_expires_at = now() + interval '5 minutes', refresh_token_issued_at = now() - interval '8 days' WHERE id = ${grantId}`,
  );

describe('one grant with three tenants', () => {
  it('refreshes once per rotation, and all three tenants push with the one token pair', async () => {
    const { org, grantId, tenantIds, connectionIds } = await connectedGrant(
      handle.db,
      box,
      sandbox,
      'Trio',
      3,
    );
    expect(await query('SELECT id FROM xero_grants WHERE organization_id = $1', [org.id])).toHaveLength(1);
    for (let rotation = 1; rotation <= 2; rotation++) {
      await expireSoon(grantId);
      const before = stats().refreshGrants;
      const result = await refreshExpiringTokens(handle.db, refreshDeps());
      expect(result.refreshed).toBe(1);
      expect(stats().refreshGrants).toBe(before + 1);
    }
    for (const [i, connectionId] of connectionIds.entries())
      await queueFor(org.id, connectionId, `trio-${i}`);
    expect(await pushDueInvoices(handle.db, pushDeps())).toMatchObject({ pushed: 3 });
    for (const tenantId of tenantIds) expect(created(tenantId)).toBe(1);
  });

  it('two replicas refreshing it together redeem each refresh token once', async () => {
    const { grantId } = await connectedGrant(handle.db, box, sandbox, 'Contended Trio', 3);
    for (let rotation = 1; rotation <= 3; rotation++) {
      await expireSoon(grantId);
      const before = stats().refreshGrants;
      const [a, b] = await Promise.all([
        refreshExpiringTokens(handle.db, refreshDeps({ owner: 'replica-a' })),
        refreshExpiringTokens(handle.db, refreshDeps({ owner: 'replica-b' })),
      ]);
      expect(a.refreshed + b.refreshed).toBe(1);
      expect(stats().refreshGrants).toBe(before + 1);
      expect(stats().refreshReusedInGrace).toBe(0);
    }
    const [grant] = await query<{ token_version: number }>(
      'SELECT token_version FROM xero_grants WHERE id = $1',
      [grantId],
    );
    expect(grant?.token_version).toBe(4);
  });

  it('disconnecting one leaves the other two pushing; the last goes the same way, never revoked', async () => {
    const { org, grantId, tenantIds, connectionIds, authEventId } = await connectedGrant(
      handle.db,
      box,
      sandbox,
      'Leaving Trio',
      3,
    );
    const app = new Hono<AuthEnv>();
    app.use(async (c, next) => {
      c.set('organization', { id: org.id, name: org.name } as Organization);
      c.set('database', handle);
      c.set('schedule', () => {});
      c.set('waitUntil', () => {});
      c.set('withDatabase', (fn) => fn(handle.db));
      await next();
    });
    app.route('/', connectionRoutes({ xero: createXeroClient(xeroConfigFor(sandbox)), box, log }));
    const xeroGrant = sandbox.state.identity.grant(authEventId);
    const before = stats();

    expect((await app.request(`/${connectionIds[0]}`, { method: 'DELETE' })).status).toBe(204);
    await until(
      async () => stats().disconnections,
      (n) => n === before.disconnections + 1,
      5000,
    );
    expect(stats().revocations).toBe(before.revocations);
    expect([...(xeroGrant?.connections.keys() ?? [])].sort()).toEqual([tenantIds[1], tenantIds[2]].sort());
    await queueFor(org.id, connectionIds[1] as string, 'left-1');
    await queueFor(org.id, connectionIds[2] as string, 'left-2');
    expect(await pushDueInvoices(handle.db, pushDeps())).toMatchObject({ pushed: 2 });
    expect(created(tenantIds[1] as string)).toBe(1);
    expect(created(tenantIds[2] as string)).toBe(1);

    expect((await app.request(`/${connectionIds[1]}`, { method: 'DELETE' })).status).toBe(204);
    expect((await app.request(`/${connectionIds[2]}`, { method: 'DELETE' })).status).toBe(204);
    // The grant's last tenant too: DELETE /connections/{id}, never /connect/revocation (which removes
    // every connection of the user to the app). The grant is forgotten here; at Xero it has no tenant.
    await until(
      async () => stats().disconnections,
      (n) => n === before.disconnections + 3,
      5000,
    );
    expect(stats().revocations).toBe(before.revocations);
    expect(xeroGrant?.revokedAt).toBeNull();
    expect(xeroGrant?.connections.size).toBe(0);
    expect(await query('SELECT id FROM xero_grants WHERE id = $1', [grantId])).toEqual([]);
  });
});

describe('answers that are not transient', () => {
  it('403 AuthenticationUnsuccessful marks the connection and leaves its pushes waiting, attempts intact', async () => {
    const { org, tenantId, connectionId } = await connectedOrganization(
      handle.db,
      box,
      sandbox,
      'Left Xero Co',
    );
    const id = await queueFor(org.id, connectionId, 'k-403');
    // The user disconnects the organisation on Xero's side.
    sandbox.state.identity.disconnectTenant(tenantId);
    await pushDueInvoices(handle.db, pushDeps());
    expect(await pushRow(url, id)).toMatchObject({ status: 'awaiting_connection', attempts: 0 });
    expect((await pushRow(url, id)).last_error).toMatch(/403 AuthenticationUnsuccessful/);
    const [connection] = await query<{ status: string; status_reason: string }>(
      'SELECT status, status_reason FROM xero_connections WHERE id = $1',
      [connectionId],
    );
    expect(connection?.status).toBe('needs_reauth');
    expect(connection?.status_reason).toMatch(/disconnected in Xero or a scope is missing/);
    // Later ticks leave it alone: no attempt is burnt while it waits.
    const calls = stats().invoiceCalls;
    await handle.db.execute(sql`UPDATE invoice_pushes SET next_attempt_at = now() WHERE id = ${id}`);
    await pushDueInvoices(handle.db, pushDeps());
    expect(stats().invoiceCalls).toBe(calls);
    expect(await pushRow(url, id)).toMatchObject({ status: 'awaiting_connection', attempts: 0 });
  });

  it('invalid_client is reported once and backs off instead of retrying every tick', async () => {
    const { grantId } = await connectedOrganization(handle.db, box, sandbox, 'Rotated Secret Co');
    await expireSoon(grantId);
    const wrong = createXeroClient({ ...xeroConfigFor(sandbox), clientSecret: 'rotated-away' });
    const credentials = new CredentialsState();
    const before = stats().invalidClients;
    const first = await refreshExpiringTokens(handle.db, refreshDeps({ xero: wrong, credentials }));
    expect(first.invalidClient).toBe(1);
    for (let tick = 0; tick < 3; tick++) {
      expect(await refreshExpiringTokens(handle.db, refreshDeps({ xero: wrong, credentials }))).toMatchObject(
        {
          claimed: 0,
        },
      );
    }
    expect(stats().invalidClients).toBe(before + 1);
    expect(lines.filter((l) => String(l.msg).includes('invalid_client'))).toHaveLength(1);
    // The grant is untouched: still active, lease given back, for when the secret is fixed.
    const [grant] = await query<{ status: string; refresh_lease_owner: string | null }>(
      'SELECT status, refresh_lease_owner FROM xero_grants WHERE id = $1',
      [grantId],
    );
    expect(grant).toEqual({ status: 'active', refresh_lease_owner: null });
  });
});

describe("Xero's rate-limit signals change the next claim", () => {
  it('day: parks the tenant until Retry-After; its other pushes stay put, other tenants go on', async () => {
    const parked = await connectedOrganization(handle.db, box, sandbox, 'Day Limit Co');
    const other = await connectedOrganization(handle.db, box, sandbox, 'Plenty Left Co');
    const first = await queueFor(parked.org.id, parked.connectionId, 'day-1');
    sandbox.state.faults.add({ target: 'invoices', kind: '429', problem: 'day', retryAfterSeconds: 7200 });
    await pushDueInvoices(handle.db, pushDeps());
    const row = await pushRow(url, first);
    expect(row).toMatchObject({ status: 'queued', attempts: 0 });
    expect(new Date(row.next_attempt_at).getTime() - Date.now()).toBeGreaterThan(7000 * 1000);
    const [connection] = await query<{ parked_until: Date }>(
      'SELECT parked_until FROM xero_connections WHERE id = $1',
      [parked.connectionId],
    );
    expect(new Date(connection?.parked_until as Date).getTime() - Date.now()).toBeGreaterThan(7000 * 1000);

    const second = await queueFor(parked.org.id, parked.connectionId, 'day-2');
    const elsewhere = await queueFor(other.org.id, other.connectionId, 'day-other');
    await pushDueInvoices(handle.db, pushDeps());
    expect(await pushRow(url, second)).toMatchObject({ status: 'queued', attempts: 0, lease_owner: null });
    expect(await pushRow(url, elsewhere)).toMatchObject({ status: 'pushed' });
    expect(created(parked.tenantId)).toBe(0);
  });

  it('appminute: pauses every tenant (Xero sends no Retry-After for it)', async () => {
    const one = await connectedOrganization(handle.db, box, sandbox, 'App Minute One');
    const two = await connectedOrganization(handle.db, box, sandbox, 'App Minute Two');
    const first = await queueFor(one.org.id, one.connectionId, 'app-1');
    sandbox.state.faults.add({ target: 'invoices', kind: '429', problem: 'appminute' });
    await pushDueInvoices(handle.db, pushDeps());
    const row = await pushRow(url, first);
    expect(row).toMatchObject({ status: 'queued', attempts: 0 });
    const wait = new Date(row.next_attempt_at).getTime() - Date.now();
    expect(wait).toBeGreaterThan(50_000);
    expect(wait).toBeLessThan(61_000);

    const other = await queueFor(two.org.id, two.connectionId, 'app-2');
    expect(await pushDueInvoices(handle.db, pushDeps())).toMatchObject({ claimed: 0 });
    expect(await pushRow(url, other)).toMatchObject({ status: 'queued', attempts: 0 });
  });

  it('X-MinLimit-Remaining 0: another replica (a fresh limiter) leaves the tenant for the next minute', async () => {
    const busy = await connectedOrganization(handle.db, box, sandbox, 'Minute Spent Co');
    sandbox.state.setLimits({ perMinute: 2 });
    await queueFor(busy.org.id, busy.connectionId, 'min-1');
    await queueFor(busy.org.id, busy.connectionId, 'min-2');
    expect(await pushDueInvoices(handle.db, pushDeps())).toMatchObject({ pushed: 2 });
    const [connection] = await query<{ min_remaining: number }>(
      'SELECT min_remaining FROM xero_connections WHERE id = $1',
      [busy.connectionId],
    );
    expect(connection?.min_remaining).toBe(0);
    const third = await queueFor(busy.org.id, busy.connectionId, 'min-3');
    const limitedBefore = stats().rateLimited;
    await pushDueInvoices(handle.db, pushDeps({ owner: 'replica-b' }));
    expect(await pushRow(url, third)).toMatchObject({ status: 'queued', attempts: 0, lease_owner: null });
    expect(stats().rateLimited).toBe(limitedBefore);
  });

  it('concurrent: retried in about a second, not after a made-up minute', async () => {
    const { org, connectionId } = await connectedOrganization(handle.db, box, sandbox, 'Concurrent Co');
    const id = await queueFor(org.id, connectionId, 'conc-1');
    sandbox.state.faults.add({ target: 'invoices', kind: '429', problem: 'concurrent' });
    await pushDueInvoices(handle.db, pushDeps());
    const row = await pushRow(url, id);
    expect(row).toMatchObject({ status: 'queued', attempts: 0 });
    expect(new Date(row.next_attempt_at).getTime() - Date.now()).toBeLessThan(3000);
  });
});

describe('validation answers', () => {
  it('records the nested messages (Contact, LineItems), not "A validation exception occurred"', async () => {
    const { org, connectionId } = await connectedOrganization(handle.db, box, sandbox, 'Nested Errors Co', {
      accountCodes: undefined,
    });
    const id = await queueFor(org.id, connectionId, 'nested', [
      { description: 'Fine', quantity: '1', unitAmount: '1.00' },
      { description: 'Widget', quantity: '1', unitAmount: '10.00', accountCode: 'NOPE' },
    ]);
    await pushDueInvoices(handle.db, pushDeps());
    const row = await pushRow(url, id);
    expect(row.status).toBe('dead');
    expect(row.last_error).toBe(
      "Xero rejected the invoice: LineItems[1]: Account code 'NOPE' is not a valid code for this document.",
    );
  });

  it('a 200 whose invoice HasErrors (summarizeErrors=false) is not a success', async () => {
    const { org, connectionId, tenantId } = await connectedOrganization(
      handle.db,
      box,
      sandbox,
      'Partial Co',
      {
        accountCodes: undefined,
      },
    );
    const id = await queueFor(org.id, connectionId, 'partial', [
      { description: 'Widget', quantity: '1', unitAmount: '10.00', accountCode: 'NOPE' },
    ]);
    // The same client, its requests asking for Xero's mixed answer (200 with per-invoice errors).
    const mixed = createXeroClient(xeroConfigFor(sandbox), (input, init) =>
      fetch(`${String(input)}&summarizeErrors=false`, init),
    );
    await pushDueInvoices(handle.db, pushDeps({ xero: mixed }));
    const row = await pushRow(url, id);
    expect(row.status).toBe('dead');
    expect(row.last_error).toMatch(/LineItems\[0\]: Account code 'NOPE'/);
    expect(row.xero_invoice_id).toBeNull();
    expect(created(tenantId)).toBe(0);
  });

  it('sends amounts as numbers with unitdp=4, so four decimal places survive', async () => {
    const { org, tenantId, connectionId } = await connectedOrganization(
      handle.db,
      box,
      sandbox,
      'Four Places Co',
    );
    const id = await queueFor(org.id, connectionId, 'unitdp', [
      { description: 'Fine-grained', quantity: '2.5', unitAmount: '0.1234' },
    ]);
    await pushDueInvoices(handle.db, pushDeps());
    const row = await pushRow(url, id);
    expect(row.status).toBe('pushed');
    const stored = sandbox.state.tenants.get(tenantId)?.invoices.get(row.xero_invoice_id);
    expect(stored?.LineItems[0]).toMatchObject({ Quantity: 2.5, UnitAmount: 0.1234 });
  });
});
