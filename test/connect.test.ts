import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../tools/xero-sandbox/server.js';
import { freshDatabase } from './support/databases.js';
import { createOrg, invoiceBody, waitForKey } from './support/orgs.js';
import { freePort } from './support/ports.js';
import { type Cluster, startCluster } from './support/postgres.js';
import { type ServerProcess, spawnServer } from './support/server.js';
import { type Sandbox, sandboxEnv } from './support/ticks.js';
import { until } from './support/until.js';

let cluster: Cluster;
let sandbox: Sandbox;
let server: ServerProcess;
let url: string;

beforeAll(async () => {
  [cluster, sandbox] = await Promise.all([startCluster(), startXeroSandbox({ port: 0 })]);
  url = await freshDatabase(cluster);
  const port = await freePort();
  server = await spawnServer({
    port,
    env: {
      DATABASE_URL: url,
      REGISTRY_REFRESH_MS: '100',
      TICK_INTERVAL_MS: '60000',
      ...sandboxEnv(sandbox),
      XERO_AUTHORIZE_URL: `${sandbox.url}/identity/connect/authorize`,
      XERO_REDIRECT_URI: `http://127.0.0.1:${port}/connect/xero/callback`,
    },
  });
  await server.waitForReady();
});
afterAll(async () => {
  await server?.stop();
  await sandbox?.close();
  await cluster?.remove();
});

const auth = (key: string) => ({ authorization: `Bearer ${key}` });
/** The organization chooses a connection as its default (issue 20: until then it receives nothing). */
const makeDefault = (key: string, connectionId: string | undefined) =>
  server.get(`/api/connections/${connectionId}/default`, { method: 'POST', headers: auth(key) });

/**
 * Walks the browser's part: our redirect to Xero, Xero's (auto-approving) redirect back to us. `plan`
 * says which tenants the user ticks (and, for a test, which scopes Xero grants).
 */
async function authorize(
  key: string,
  plan: { tenantIds?: string[]; grantScope?: string } = {},
): Promise<string> {
  sandbox.state.authorizePlans.push({
    deny: false,
    tenantIds: plan.tenantIds ?? [sandbox.state.createTenant({ name: `Tenant ${crypto.randomUUID()}` }).id],
    grantScope: plan.grantScope ?? null,
  });
  const start = await server.get('/connect/xero', { headers: auth(key), redirect: 'manual' });
  expect(start.status).toBe(302);
  const toXero = new URL(start.headers.get('location') ?? '');
  expect(toXero.origin + toXero.pathname).toBe(`${sandbox.url}/identity/connect/authorize`);
  expect(toXero.searchParams.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  const approved = await fetch(toXero, { redirect: 'manual' });
  expect(approved.status).toBe(302);
  return approved.headers.get('location') ?? '';
}

describe('the Xero connect flow', () => {
  it('connects an organization, then pushes the invoices that waited for it', async () => {
    const org = await createOrg(url, 'Connect Co');
    await waitForKey(server, org.apiKey);
    const waiting = await server.get('/api/invoices', {
      method: 'POST',
      headers: {
        ...auth(org.apiKey),
        'content-type': 'application/json',
        'idempotency-key': 'before-connect',
      },
      body: JSON.stringify(invoiceBody()),
    });
    const { id, status } = (await waiting.json()) as { id: string; status: string };
    expect(status).toBe('awaiting_connection');

    const callback = await authorize(org.apiKey);
    const done = await fetch(callback);
    expect(done.status).toBe(200);
    const { connected } = (await done.json()) as { connected: { id: string; tenantId: string }[] };
    expect(connected).toHaveLength(1);

    const list = (await (await server.get('/api/connections', { headers: auth(org.apiKey) })).json()) as {
      data: { id: string; status: string }[];
    };
    expect(list.data).toEqual([expect.objectContaining({ id: connected[0]?.id, status: 'active' })]);
    // Tokens are stored encrypted, never in the clear.
    const db = new pg.Client(url);
    await db.connect();
    const stored = await db.query('SELECT access_token_enc, refresh_token_enc FROM xero_grants');
    await db.end();
    expect(JSON.stringify(stored.rows)).not.toMatch(/eyJ/);

    // Connected is not chosen: the invoice still waits, saying why.
    const still = (await (await server.get(`/api/invoices/${id}`, { headers: auth(org.apiKey) })).json()) as {
      status: string;
      lastError: string;
    };
    expect(still).toMatchObject({
      status: 'awaiting_connection',
      lastError: expect.stringMatching(/default/),
    });
    expect((await makeDefault(org.apiKey, connected[0]?.id)).status).toBe(200);

    // Choosing the default queued the waiting invoice and started a push at once (the tick interval is
    // a minute).
    const pushed = await until(
      async () =>
        (await (await server.get(`/api/invoices/${id}`, { headers: auth(org.apiKey) })).json()) as {
          status: string;
        },
      (i) => i.status === 'pushed',
      10_000,
    );
    expect(pushed.status).toBe('pushed');
    expect(sandbox.state.statsSnapshot().invoicesCreated[connected[0]?.tenantId ?? '']).toBe(1);
  });

  it('rejects a replayed state and an expired one', async () => {
    const org = await createOrg(url, 'Replay Co');
    await waitForKey(server, org.apiKey);
    const callback = await authorize(org.apiKey);
    expect((await fetch(callback)).status).toBe(200);
    const replay = await fetch(callback);
    expect(replay.status).toBe(400);
    expect(((await replay.json()) as { error: { code: string } }).error.code).toBe('invalid_state');

    const second = await authorize(org.apiKey);
    const db = new pg.Client(url);
    await db.connect();
    await db.query(`UPDATE oauth_states SET expires_at = now() - interval '1 second'`);
    await db.end();
    const expired = await fetch(second);
    expect(expired.status).toBe(400);
    expect(((await expired.json()) as { error: { code: string } }).error.code).toBe('invalid_state');

    const forged = await server.get('/connect/xero/callback?code=abc&state=forged');
    expect(forged.status).toBe(400);
    expect((await server.get('/connect/xero')).status).toBe(401);
  });

  it('keeps organizations apart: one Xero user connecting two organizations hands each only its own tenants', async () => {
    const a = await createOrg(url, 'Bookkeeper client A');
    const b = await createOrg(url, 'Bookkeeper client B');
    await waitForKey(server, a.apiKey);
    await waitForKey(server, b.apiKey);
    const tenantA = sandbox.state.createTenant({ name: 'A Ltd', accountCodes: null }).id;
    const tenantB = sandbox.state.createTenant({ name: 'B Ltd', accountCodes: null }).id;

    // The same Xero user (the sandbox has one) approves A's tenant for A, then B's for B. Xero's
    // /connections now lists both tenants for that user; B must get only the tenant of its own consent.
    const doneA = (await (await fetch(await authorize(a.apiKey, { tenantIds: [tenantA] }))).json()) as {
      connected: { id: string; tenantId: string }[];
    };
    expect(doneA.connected.map((c) => c.tenantId)).toEqual([tenantA]);
    const doneB = (await (await fetch(await authorize(b.apiKey, { tenantIds: [tenantB] }))).json()) as {
      connected: { id: string; tenantId: string }[];
      refused: unknown[];
    };
    expect(doneB.connected.map((c) => c.tenantId)).toEqual([tenantB]);
    // A's tenant was never even offered to B: it is not part of B's consent.
    expect(doneB.refused).toEqual([]);

    const list = async (key: string) =>
      (
        (await (await server.get('/api/connections', { headers: auth(key) })).json()) as {
          data: { id: string; tenantId: string }[];
        }
      ).data;
    expect((await list(a.apiKey)).map((c) => c.tenantId)).toEqual([tenantA]);
    expect((await list(b.apiKey)).map((c) => c.tenantId)).toEqual([tenantB]);

    // Each chooses its own tenant, and pushes only to it.
    expect((await makeDefault(a.apiKey, doneA.connected[0]?.id)).status).toBe(200);
    expect((await makeDefault(b.apiKey, doneB.connected[0]?.id)).status).toBe(200);
    for (const org of [a, b]) {
      const res = await server.get('/api/invoices', {
        method: 'POST',
        headers: {
          ...auth(org.apiKey),
          'content-type': 'application/json',
          'idempotency-key': `own-${org.id}`,
        },
        body: JSON.stringify(invoiceBody()),
      });
      expect(res.status).toBe(202);
    }
    await until(
      async () => sandbox.state.statsSnapshot().invoicesCreated,
      (n) => n[tenantA] === 1 && n[tenantB] === 1,
      10_000,
    );

    // B's user ticks A's tenant too: it is refused (held by A), never moved to B.
    const again = await fetch(await authorize(b.apiKey, { tenantIds: [tenantA, tenantB] }));
    expect(again.status).toBe(200);
    const third = (await again.json()) as {
      connected: { tenantId: string }[];
      refused: { tenantId: string; reason: string }[];
    };
    expect(third.connected.map((c) => c.tenantId)).toEqual([tenantB]);
    expect(third.refused).toEqual([
      expect.objectContaining({ tenantId: tenantA, reason: 'held_by_another_organization' }),
    ]);
    expect((await list(a.apiKey)).map((c) => c.tenantId)).toEqual([tenantA]);
    expect((await list(b.apiKey)).map((c) => c.tenantId)).toEqual([tenantB]);

    // Neither can disconnect the other's tenant.
    const aConnection = (await list(a.apiKey))[0]?.id ?? '';
    const bDeletes = await server.get(`/api/connections/${aConnection}`, {
      method: 'DELETE',
      headers: auth(b.apiKey),
    });
    expect(bDeletes.status).toBe(404);
  });

  it('answers 502 (not 500) when Xero fails to list the approved tenants', async () => {
    const org = await createOrg(url, 'Connections Down Co');
    await waitForKey(server, org.apiKey);
    const callback = await authorize(org.apiKey);
    sandbox.state.faults.add({ target: 'connections', kind: '500' });
    const done = await fetch(callback);
    expect(done.status).toBe(502);
    expect(((await done.json()) as { error: { code: string } }).error.code).toBe('xero_connections_failed');
  });

  it('says so when the granted scopes cannot create invoices', async () => {
    const org = await createOrg(url, 'Narrow Scope Co');
    await waitForKey(server, org.apiKey);
    const done = await fetch(
      await authorize(org.apiKey, { grantScope: 'offline_access accounting.contacts' }),
    );
    expect(done.status).toBe(400);
    const body = (await done.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('xero_scope_missing');
    expect(body.error.message).toMatch(/accounting\.invoices/);
    const list = (await (await server.get('/api/connections', { headers: auth(org.apiKey) })).json()) as {
      data: unknown[];
    };
    expect(list.data).toEqual([]);
  });

  it('disconnects one tenant with DELETE /connections/{id}, never revoking, even when the last one leaves', async () => {
    const org = await createOrg(url, 'Three Tenants Co');
    await waitForKey(server, org.apiKey);
    const tenants = [1, 2, 3].map((i) => sandbox.state.createTenant({ name: `Three ${i}` }).id);
    const done = (await (await fetch(await authorize(org.apiKey, { tenantIds: tenants }))).json()) as {
      connected: { id: string; tenantId: string }[];
    };
    expect(done.connected).toHaveLength(3);
    const grant = sandbox.state.identity.grants().find((g) => g.connections.has(tenants[0] as string));
    expect(grant?.connections.size).toBe(3);

    const before = sandbox.state.statsSnapshot();
    const del = (id: string) =>
      server.get(`/api/connections/${id}`, { method: 'DELETE', headers: auth(org.apiKey) });
    expect((await del(done.connected[0]?.id ?? '')).status).toBe(204);
    await until(
      async () => sandbox.state.statsSnapshot().disconnections,
      (n) => n === before.disconnections + 1,
      5000,
    );
    expect(grant?.connections.has(tenants[0] as string)).toBe(false);
    expect(grant?.connections.size).toBe(2);
    expect(sandbox.state.statsSnapshot().revocations).toBe(before.revocations);

    expect((await del(done.connected[1]?.id ?? '')).status).toBe(204);
    await until(
      async () => sandbox.state.statsSnapshot().disconnections,
      (n) => n === before.disconnections + 2,
      5000,
    );
    expect(sandbox.state.statsSnapshot().revocations).toBe(before.revocations);

    // The last tenant of the grant goes the same way: DELETE /connections/{id}, never a revocation
    // (which would remove every connection of this Xero user to the app). The grant is forgotten here.
    expect((await del(done.connected[2]?.id ?? '')).status).toBe(204);
    await until(
      async () => sandbox.state.statsSnapshot().disconnections,
      (n) => n === before.disconnections + 3,
      5000,
    );
    expect(sandbox.state.statsSnapshot().revocations).toBe(before.revocations);
    expect(grant?.revokedAt).toBeNull();
    expect(grant?.connections.size).toBe(0);
    const db = new pg.Client(url);
    await db.connect();
    const grants = await db.query('SELECT count(*)::int AS n FROM xero_grants WHERE organization_id = $1', [
      org.id,
    ]);
    await db.end();
    expect(grants.rows[0].n).toBe(0);
  });
});
