// Against the sandbox and a real Postgres: the organization chooses its books (a connection
// nobody chose receives nothing), a disconnect never takes another connection of the same Xero user
// with it, and one tenant has one holder even when two organizations connect it at the same instant.

import { loadConfig } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import { DatabaseHandle, migrate } from '@honest-health/platform/db';
import { type SQL, sql } from 'drizzle-orm';
import { Hono } from 'hono';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import type { Organization } from '../src/app/api-key-registry.js';
import type { AuthEnv } from '../src/app/auth.js';
import { type SavedGrant, saveGrant } from '../src/app/connections/grants.js';
import { connectionRoutes } from '../src/app/connections/routes.js';
import { openDriver } from '../src/app/databases.js';
import { answerAppError } from '../src/app/errors.js';
import { invoiceRoutes } from '../src/app/invoices/routes.js';
import { migrations } from '../src/app/migrations.gen.js';
import { createOrganization, removeOrganization } from '../src/app/organizations.js';
import { type PushTickDeps, pushDueInvoices } from '../src/app/push/tick.js';
import { authEventIdOf, createXeroClient } from '../src/app/xero/client.js';
import { freshDatabase, migratedDatabase } from './support/databases.js';
import { invoiceBody } from './support/orgs.js';
import type { Cluster } from './support/postgres.js';
import { sharedCluster } from './support/shared-postgres.js';
import {
  captureLog,
  openDatabase,
  pushTickDeps,
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
  // No test leaves due pushes behind for the next one's tick.
  await handle.db.execute(
    sql`UPDATE invoice_pushes SET status = 'dead' WHERE status IN ('queued', 'failed')`,
  );
  sandbox.state.faults.clear();
});

/** A query's rows (db.execute's result type differs per driver). */
const on =
  (db: DatabaseHandle) =>
  async <T>(query: SQL): Promise<{ rows: T[] }> =>
    (await db.db.execute(query)) as unknown as { rows: T[] };
const stats = () => sandbox.state.statsSnapshot();
const created = (tenantId: string) => stats().invoicesCreated[tenantId] ?? 0;
const tenant = (name: string) => sandbox.state.createTenant({ name, accountCodes: null }).id;

function pushDeps(): PushTickDeps {
  return pushTickDeps(sandbox, box, log, { owner: 'routing' });
}
const tick = () => pushDueInvoices(handle.db, pushDeps());

/** The API as one organization sees it: its connections and its invoices, in process. */
function apiFor(org: { id: string; name: string }) {
  const app = new Hono<AuthEnv>();
  app.use(async (c, next) => {
    c.set('organization', { id: org.id, name: org.name } as Organization);
    c.set('database', handle);
    c.set('schedule', () => {});
    c.set('waitUntil', () => {});
    c.set('withDatabase', (fn) => fn(handle.db));
    await next();
  });
  app.onError((err, c) => answerAppError(err, c, log) ?? c.text('internal error', 500));
  app.route(
    '/api/connections',
    connectionRoutes({ xero: createXeroClient(xeroConfigFor(sandbox)), box, log }),
  );
  app.route('/api/invoices', invoiceRoutes({ pushTick: 'push-invoices' }));
  let keys = 0;
  const json = async <T>(res: Response | Promise<Response>) => (await res) as Response & { body: T };
  return {
    post: (body: Record<string, unknown> = {}, key = `${org.id}-${++keys}`) =>
      json(
        app.request('/api/invoices', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify(invoiceBody(body)),
        }),
      ),
    invoice: async (id: string) =>
      (await (await app.request(`/api/invoices/${id}`)).json()) as {
        status: string;
        tenantId: string | null;
        lastError: string | null;
        xeroInvoiceId: string | null;
      },
    connections: async () =>
      (
        (await (await app.request('/api/connections')).json()) as {
          data: { id: string; tenantId: string; chosen: boolean; default: boolean }[];
        }
      ).data,
    choose: (id: string, asDefault = true) =>
      app.request(`/api/connections/${id}/${asDefault ? 'default' : 'choose'}`, { method: 'POST' }),
    disconnect: (id: string) => app.request(`/api/connections/${id}`, { method: 'DELETE' }),
  };
}

/**
 * One consent of the sandbox's (single) Xero user for these tenants, saved for the organization as
 * the connect callback saves it.
 */
async function consent(
  organizationId: string,
  tenantIds: string[],
): Promise<SavedGrant & { authEventId: string }> {
  const { grant, tokens } = sandbox.state.createGrant({ tenantIds }) as unknown as {
    grant: { authEventId: string; connections: Map<string, { id: string }> };
    tokens: { access_token: string; refresh_token: string; expires_in: number; scope: string };
  };
  const saved = await saveGrant(handle.db, box, {
    organizationId,
    authEventId: authEventIdOf(tokens.access_token),
    scope: tokens.scope,
    tokens: {
      accessToken: tokens.access_token,
      refreshToken: tokens.refresh_token,
      expiresAt: new Date(Date.now() + tokens.expires_in * 1000),
    },
    tenants: tenantIds.map((tenantId) => ({
      tenantId,
      tenantName: sandbox.state.tenants.get(tenantId)?.name ?? null,
      connectionId: grant.connections.get(tenantId)?.id ?? null,
      authEventId: grant.authEventId,
    })),
  });
  return { ...saved, authEventId: grant.authEventId };
}

const idOf = (saved: SavedGrant, tenantId: string) =>
  saved.connected.find((c) => c.tenantId === tenantId)?.id as string;

/** Posts an invoice and runs the push tick: the invoice's final view. */
async function pushOne(api: ReturnType<typeof apiFor>, body: Record<string, unknown> = {}) {
  const res = await api.post(body);
  expect(res.status).toBe(202);
  const { id } = (await res.json()) as { id: string };
  await tick();
  return api.invoice(id);
}

describe('disconnect without collateral', () => {
  it('organization B deleting its own last connection leaves A’s tenant of the same Xero user pushing', async () => {
    // The bookkeeper: one Xero user connects tenant T1 for organization A, then, for B, a
    // consent with T1 (A holds it: refused) and T2.
    const a = await createOrganization(handle.db, 'Bookkeeper A');
    const b = await createOrganization(handle.db, 'Bookkeeper B');
    const [t1, t2] = [tenant('A books'), tenant('B books')];
    const forA = await consent(a.id, [t1]);
    const apiA = apiFor(a);
    expect((await apiA.choose(idOf(forA, t1))).status).toBe(200);
    const forB = await consent(b.id, [t1, t2]);
    expect(forB.connected.map((c) => c.tenantId)).toEqual([t2]);
    expect(forB.refused).toEqual([
      expect.objectContaining({ tenantId: t1, reason: 'held_by_another_organization' }),
    ]);
    expect(await pushOne(apiA)).toMatchObject({ status: 'pushed' });

    const before = stats();
    expect((await apiFor(b).disconnect(idOf(forB, t2))).status).toBe(204);
    await until(
      // Whatever Xero was told (a disconnect, or on the old code a revocation), then what it did.
      async () => stats().disconnections + stats().revocations,
      (n) => n === before.disconnections + before.revocations + 1,
      5000,
    );
    // B's grant had no tenant left: it is forgotten here. At Xero it stays, reaching T1 only.
    const [grantsOfB] = (
      await on(handle)<{ n: number }>(
        sql`SELECT count(*)::int AS n FROM xero_grants WHERE organization_id = ${b.id}`,
      )
    ).rows as { n: number }[];
    expect(grantsOfB?.n).toBe(0);

    // A still pushes to T1: no 403, no needs_reauth.
    expect(await pushOne(apiA)).toMatchObject({ status: 'pushed', tenantId: t1 });
    expect(created(t1)).toBe(2);
    expect(stats().revocations).toBe(before.revocations);
    expect(sandbox.state.identity.grant(forB.authEventId)?.revokedAt).toBeNull();
    expect((await apiA.connections())[0]).toMatchObject({ tenantId: t1, chosen: true, default: true });
    const [row] = (
      await on(handle)<{ status: string }>(
        sql`SELECT status FROM xero_connections WHERE id = ${idOf(forA, t1)}`,
      )
    ).rows as { status: string }[];
    expect(row?.status).toBe('active');
  });

  it('disconnecting one tenant, then a grant’s last, leaves every other connection of the user working', async () => {
    const a = await createOrganization(handle.db, 'Many Books A');
    const b = await createOrganization(handle.db, 'Many Books B');
    const [t1, t2, t3, t4] = [tenant('A one'), tenant('A two'), tenant('A three'), tenant('B four')];
    const first = await consent(a.id, [t1, t2]);
    const second = await consent(a.id, [t3]);
    const other = await consent(b.id, [t4]);
    const [apiA, apiB] = [apiFor(a), apiFor(b)];
    for (const t of [t1, t2]) expect((await apiA.choose(idOf(first, t), false)).status).toBe(200);
    expect((await apiA.choose(idOf(second, t3), true)).status).toBe(200);
    expect((await apiB.choose(idOf(other, t4))).status).toBe(200);
    const before = stats();
    const allPush = async (tenants: string[]) => {
      for (const t of tenants)
        expect(
          await pushOne(t === t4 ? apiB : apiA, t === t3 || t === t4 ? {} : { tenantId: t }),
        ).toMatchObject({
          status: 'pushed',
          tenantId: t,
        });
    };

    expect((await apiA.disconnect(idOf(first, t1))).status).toBe(204);
    await until(
      // Whatever Xero was told (a disconnect, or on the old code a revocation), then what it did.
      async () => stats().disconnections + stats().revocations,
      (n) => n === before.disconnections + before.revocations + 1,
      5000,
    );
    await allPush([t2, t3, t4]);
    // T2 is the first grant's last tenant: still a DELETE /connections/{id}, never a revocation.
    expect((await apiA.disconnect(idOf(first, t2))).status).toBe(204);
    await until(
      async () => stats().disconnections + stats().revocations,
      (n) => n === before.disconnections + before.revocations + 2,
      5000,
    );
    await allPush([t3, t4]);
    expect(stats().revocations).toBe(before.revocations);
    expect(sandbox.state.identity.userConnections('sandbox-client').map((c) => c.tenantId)).toEqual(
      expect.arrayContaining([t3, t4]),
    );
    // The tenants that left are gone at Xero, and a named invoice for one of them is refused.
    expect(
      sandbox.state.identity
        .userConnections('sandbox-client')
        .some((c) => c.tenantId === t1 || c.tenantId === t2),
    ).toBe(false);
    expect((await apiA.post({ tenantId: t1 })).status).toBe(422);
  });

  it('a stale access token: the forgotten grant is refreshed once for the DELETE; a grant in use is not', async () => {
    const org = await createOrganization(handle.db, 'Stale Token Co');
    const api = apiFor(org);
    const [t1, t2] = [tenant('Stale one'), tenant('Stale two')];
    const saved = await consent(org.id, [t1, t2]);
    await handle.db.execute(
      sql`UPDATE xero_grants SET access_expires_at = now() - interval '1 minute' WHERE id = ${saved.grantId}`,
    );
    const before = stats();
    // T1: the grant keeps T2, so its refresh token stays the refresh tick's; T1 is left at Xero.
    expect((await api.disconnect(idOf(saved, t1))).status).toBe(204);
    await until(
      async () => lines.filter((l) => l.tenant === t1 && String(l.msg).includes('left connected at Xero')),
      (found) => found.length === 1,
      5000,
    );
    expect(stats().refreshGrants).toBe(before.refreshGrants);
    expect(stats().disconnections).toBe(before.disconnections);
    expect(sandbox.state.identity.grant(saved.authEventId)?.connections.has(t1)).toBe(true);
    // T2, the grant's last: forgotten here, so its refresh token is redeemed once to make the call.
    expect((await api.disconnect(idOf(saved, t2))).status).toBe(204);
    await until(
      async () => stats().disconnections,
      (n) => n === before.disconnections + 1,
      5000,
    );
    expect(stats().refreshGrants).toBe(before.refreshGrants + 1);
    expect(stats().revocations).toBe(before.revocations);
    expect(sandbox.state.identity.grant(saved.authEventId)?.connections.has(t2)).toBe(false);
  });
});

describe('the organization chooses its books', () => {
  it('a connection nobody chose receives nothing; /default routes to it; tenantId must be chosen', async () => {
    const org = await createOrganization(handle.db, 'Chooser Co');
    const api = apiFor(org);
    const early = (await (await api.post()).json()) as { id: string };
    const [t1, t2] = [tenant('Chooser main'), tenant('Chooser other')];
    const saved = await consent(org.id, [t1, t2]);
    expect(saved.connected).toHaveLength(2);
    // Connected, not chosen: the early invoice and a new one wait, with the reason, and the tick sends
    // nothing to either tenant.
    const late = (await (await api.post()).json()) as { id: string };
    await tick();
    for (const id of [early.id, late.id])
      expect(await api.invoice(id)).toMatchObject({
        status: 'awaiting_connection',
        tenantId: null,
        lastError: expect.stringContaining('no Xero tenant chosen: POST /api/connections/{id}/default'),
      });
    expect(created(t1) + created(t2)).toBe(0);
    expect(await api.connections()).toEqual([
      expect.objectContaining({ chosen: false, default: false }),
      expect.objectContaining({ chosen: false, default: false }),
    ]);
    const unchosen = await api.post({ tenantId: t2 });
    expect(unchosen.status).toBe(422);
    expect(await unchosen.json()).toMatchObject({ error: { fields: [{ path: 'tenantId' }] } });

    expect((await api.choose(idOf(saved, t1))).status).toBe(200);
    await tick();
    for (const id of [early.id, late.id])
      expect(await api.invoice(id)).toMatchObject({ status: 'pushed', tenantId: t1 });
    expect(created(t1)).toBe(2);
    expect(created(t2)).toBe(0);

    // The other tenant, once chosen, receives exactly the invoices that name it.
    expect((await api.choose(idOf(saved, t2), false)).status).toBe(200);
    expect(await pushOne(api, { tenantId: t2 })).toMatchObject({ status: 'pushed', tenantId: t2 });
    expect(await pushOne(api)).toMatchObject({ status: 'pushed', tenantId: t1 });
    expect([created(t1), created(t2)]).toEqual([3, 1]);
    // Changing the default moves it: one default per organization.
    expect(await (await api.choose(idOf(saved, t2))).json()).toMatchObject({ default: true });
    expect((await api.connections()).map((c) => [c.tenantId, c.default])).toEqual([
      [t1, false],
      [t2, true],
    ]);
    // Another organization cannot name this tenant, nor choose its connection.
    const stranger = apiFor(await createOrganization(handle.db, 'Stranger Co'));
    expect((await stranger.post({ tenantId: t1 })).status).toBe(422);
    expect((await stranger.choose(idOf(saved, t1))).status).toBe(404);
    // An organization with a default can still be removed (npm run org:remove), its rows with it.
    expect(await removeOrganization(handle.db, org.id)).toBe(true);
    const left = await on(handle)<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM xero_connections WHERE organization_id = ${org.id}`,
    );
    expect(left.rows[0]?.n).toBe(0);
  });

  it('a reconnect of the same tenant resumes its invoices; another tenant never receives them', async () => {
    const org = await createOrganization(handle.db, 'Reconnecting Co');
    const api = apiFor(org);
    const [t1, t2] = [tenant('Reconnect main'), tenant('Reconnect other')];
    const saved = await consent(org.id, [t1]);
    const connectionId = idOf(saved, t1);
    expect((await api.choose(connectionId)).status).toBe(200);

    // The tenant leaves in Xero: its invoice waits (403), and the organization connects another tenant
    // meanwhile, chosen but not the default.
    sandbox.state.identity.disconnectTenant(t1);
    const waiting = (await (await api.post()).json()) as { id: string };
    await tick();
    expect(await api.invoice(waiting.id)).toMatchObject({ status: 'awaiting_connection', tenantId: t1 });
    const otherSaved = await consent(org.id, [t2]);
    expect((await api.choose(idOf(otherSaved, t2), false)).status).toBe(200);
    await tick();
    expect(created(t2)).toBe(0);

    // Reconnecting T1 keeps its connection (same id, still the default) and resumes its invoice.
    const again = await consent(org.id, [t1]);
    expect(idOf(again, t1)).toBe(connectionId);
    await tick();
    expect(await api.invoice(waiting.id)).toMatchObject({ status: 'pushed', tenantId: t1 });
    expect([created(t1), created(t2)]).toEqual([1, 0]);

    // Disconnected here: the invoice not yet sent keeps its tenant and waits, even when the other
    // tenant becomes the default.
    const queued = (await (await api.post()).json()) as { id: string };
    expect((await api.disconnect(connectionId)).status).toBe(204);
    expect(await api.invoice(queued.id)).toMatchObject({
      status: 'awaiting_connection',
      tenantId: t1,
      lastError: expect.stringMatching(/was disconnected/),
    });
    // A consent for yet another tenant takes none of them (the old code gave it "the first tenant").
    const t3 = tenant('Reconnect third');
    await consent(org.id, [t3]);
    await tick();
    expect(await api.invoice(queued.id)).toMatchObject({ status: 'awaiting_connection', tenantId: t1 });
    expect(created(t3)).toBe(0);
    expect((await api.choose(idOf(otherSaved, t2))).status).toBe(200);
    expect(await pushOne(api)).toMatchObject({ status: 'pushed', tenantId: t2 });
    expect(await api.invoice(queued.id)).toMatchObject({ status: 'awaiting_connection', tenantId: t1 });

    // Connected again: a new connection, unchosen, so the invoice is bound to it but still waits,
    // saying so; choosing it sends it there, and only there.
    const third = await consent(org.id, [t1]);
    const reborn = idOf(third, t1);
    expect(reborn).not.toBe(connectionId);
    await tick();
    expect(await api.invoice(queued.id)).toMatchObject({
      status: 'awaiting_connection',
      lastError: expect.stringContaining(`POST /api/connections/${reborn}/choose`),
    });
    expect((await api.choose(reborn, false)).status).toBe(200);
    await tick();
    expect(await api.invoice(queued.id)).toMatchObject({ status: 'pushed', tenantId: t1 });
    expect([created(t1), created(t2)]).toEqual([2, 1]);
  });
});

describe('one tenant, one holder', () => {
  it('two organizations connecting one tenant at the same instant: exactly one holds it, the other is refused', async () => {
    for (let round = 0; round < 12; round++) {
      const [a, b] = await Promise.all([
        createOrganization(handle.db, `Racer A ${round}`),
        createOrganization(handle.db, `Racer B ${round}`),
      ]);
      const contested = tenant(`Contested ${round}`);
      // Truly concurrent: each saveGrant runs on its own pool connection.
      const results = await Promise.all([consent(a.id, [contested]), consent(b.id, [contested])]);
      expect(results.map((r) => r.connected.length).sort()).toEqual([0, 1]);
      const loser = results.find((r) => r.connected.length === 0);
      expect(loser?.refused).toEqual([
        expect.objectContaining({ tenantId: contested, reason: 'held_by_another_organization' }),
      ]);
      expect(loser?.grantId).toBeNull();
      const holders = (
        await on(handle)<{ organization_id: string }>(
          sql`SELECT organization_id FROM xero_connections WHERE tenant_id = ${contested}`,
        )
      ).rows;
      expect(holders).toHaveLength(1);
    }
    // The database, not the application, refuses a second holder.
    const org = await createOrganization(handle.db, 'Direct Writer');
    const held = (
      await on(handle)<{ tenant_id: string; grant_id: string }>(
        sql`SELECT tenant_id, grant_id FROM xero_connections LIMIT 1`,
      )
    ).rows[0] as { tenant_id: string; grant_id: string };
    const client = new pg.Client(url);
    await client.connect();
    try {
      await expect(
        client.query(
          'INSERT INTO xero_connections (organization_id, grant_id, tenant_id) VALUES ($1, $2, $3)',
          [org.id, held.grant_id, held.tenant_id],
        ),
      ).rejects.toMatchObject({ code: '23505', constraint: 'xero_connections_tenant_unique' });
    } finally {
      await client.end();
    }
  });
});

describe('migration 0010 (routing and one holder)', () => {
  it('keeps an existing database working: connections chosen, the oldest active the default, duplicates settled', async () => {
    const oldUrl = await freshDatabase(cluster);
    const driver = openDriver(loadConfig({ DATABASE_URL: oldUrl }), log);
    await driver.ready();
    const old = new DatabaseHandle(driver, 'app', log);
    const index = migrations.findIndex((m) => m.tag === '0010_routing_and_one_holder');
    expect(index).toBeGreaterThan(0);
    try {
      await migrate(old.pool, migrations.slice(0, index), log);
      // Organizations as the previous release wrote them (the columns it knows).
      const org = async (name: string) =>
        (
          await on(old)<{ id: string; name: string }>(
            sql`INSERT INTO organizations (name, api_key_hash) VALUES (${name}, ${crypto.randomUUID()}) RETURNING id, name`,
          )
        ).rows[0] as { id: string; name: string };
      const a = await org('Existing A');
      const b = await org('Existing B');
      const [t1, t2, shared] = [tenant('Existing one'), tenant('Existing two'), tenant('Existing shared')];
      const insert = async (org: string, tenantId: string, status = 'active') => {
        const grant = (
          await on(old)<{ id: string }>(
            sql`INSERT INTO xero_grants (organization_id, refresh_token_enc) VALUES (${org}, 'x') RETURNING id`,
          )
        ).rows[0] as { id: string };
        const row = (
          await on(old)<{ id: string }>(sql`
            INSERT INTO xero_connections (organization_id, grant_id, tenant_id, status)
            VALUES (${org}, ${grant.id}, ${tenantId}, ${status}) RETURNING id`)
        ).rows[0] as { id: string };
        return row.id;
      };
      const needsReauth = await insert(a.id, t1, 'needs_reauth');
      const oldest = await insert(a.id, t2);
      const newer = await insert(a.id, shared);
      // The race the old key allowed: B holds the shared tenant too, and has a push waiting for it.
      const duplicate = await insert(b.id, shared);
      const push = (
        await on(old)<{ id: string }>(sql`
          INSERT INTO invoice_pushes (organization_id, connection_id, idempotency_key, request_hash, payload, status)
          VALUES (${b.id}, ${duplicate}, 'dup-push', 'test', '{}'::jsonb, 'queued') RETURNING id`)
      ).rows[0] as { id: string };

      const applied = await migrate(old.pool, migrations, log);
      expect(applied.applied).toContain('0010_routing_and_one_holder');
      const rows = (
        await on(old)<{ id: string; chosen: boolean }>(
          sql`SELECT id, chosen FROM xero_connections WHERE organization_id IN (${a.id}, ${b.id}) ORDER BY created_at`,
        )
      ).rows as { id: string; chosen: boolean }[];
      // A keeps all three (it held the shared tenant first), every one chosen; B's duplicate is gone.
      expect(rows).toEqual([needsReauth, oldest, newer].map((id) => ({ id, chosen: true })));
      const defaults = (
        await on(old)<{ id: string; default_connection_id: string | null }>(
          sql`SELECT id, default_connection_id FROM organizations WHERE id IN (${a.id}, ${b.id})`,
        )
      ).rows;
      expect(Object.fromEntries(defaults.map((o) => [o.id, o.default_connection_id]))).toEqual({
        [a.id]: oldest,
        [b.id]: null,
      });
      // B's push is kept, waiting, its tenant remembered, the reason given: never sent to A's books.
      const [kept] = (
        await on(old)<{ status: string; tenant_id: string; last_error: string; connection_id: null }>(
          sql`SELECT status, tenant_id, last_error, connection_id FROM invoice_pushes WHERE id = ${push.id}`,
        )
      ).rows;
      expect(kept).toMatchObject({
        status: 'awaiting_connection',
        tenant_id: shared,
        connection_id: null,
        last_error: expect.stringMatching(/held by another organization/),
      });
      // Ingress of the new release routes A's invoice to the default, as the old one did.
      const api = apiForHandle(old, a);
      const res = await api.request('/api/invoices', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'after-migration' },
        body: JSON.stringify(invoiceBody()),
      });
      expect(await res.json()).toMatchObject({ status: 'queued', tenantId: t2 });
    } finally {
      await old.close();
    }
  });
});

function apiForHandle(db: DatabaseHandle, org: { id: string; name: string }) {
  const app = new Hono<AuthEnv>();
  app.use(async (c, next) => {
    c.set('organization', { id: org.id, name: org.name } as Organization);
    c.set('database', db);
    c.set('schedule', () => {});
    c.set('waitUntil', () => {});
    c.set('withDatabase', (fn) => fn(db.db));
    await next();
  });
  app.onError((err, c) => answerAppError(err, c, log) ?? c.text('internal error', 500));
  app.route('/api/invoices', invoiceRoutes({ pushTick: 'push-invoices' }));
  return app;
}
