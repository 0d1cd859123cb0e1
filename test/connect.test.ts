import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../tools/xero-sandbox/server.js';
import { freshDatabase } from './support/databases.js';
import { createOrg, invoiceBody, waitForKey } from './support/orgs.js';
import { freePort } from './support/ports.js';
import { type Cluster, startCluster } from './support/postgres.js';
import { type ServerProcess, spawnServer } from './support/server.js';
import type { Sandbox } from './support/ticks.js';
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
      XERO_API_URL: sandbox.url,
      XERO_IDENTITY_URL: `${sandbox.url}/identity`,
      XERO_AUTHORIZE_URL: `${sandbox.url}/identity/connect/authorize`,
      XERO_REDIRECT_URI: `http://127.0.0.1:${port}/connect/xero/callback`,
      XERO_CLIENT_ID: 'sandbox-client',
      XERO_CLIENT_SECRET: 'sandbox-secret',
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

/** Walks the browser's part: our redirect to Xero, Xero's (auto-approving) redirect back to us. */
async function authorize(key: string): Promise<string> {
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
    const stored = await db.query('SELECT access_token_enc, refresh_token_enc FROM xero_connections');
    await db.end();
    expect(JSON.stringify(stored.rows)).not.toMatch(/eyJ/);

    // Connecting queued the waiting invoice and started a push at once (the tick interval is a minute).
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

  it('keeps organizations apart and disconnects, revoking at Xero', async () => {
    const a = await createOrg(url, 'Tenant A');
    const b = await createOrg(url, 'Tenant B');
    await waitForKey(server, a.apiKey);
    await waitForKey(server, b.apiKey);
    const done = await fetch(await authorize(a.apiKey));
    const { connected } = (await done.json()) as { connected: { id: string }[] };
    const connectionId = connected[0]?.id ?? '';

    const asB = (await (await server.get('/api/connections', { headers: auth(b.apiKey) })).json()) as {
      data: unknown[];
    };
    expect(asB.data).toEqual([]);
    const bDeletes = await server.get(`/api/connections/${connectionId}`, {
      method: 'DELETE',
      headers: auth(b.apiKey),
    });
    expect(bDeletes.status).toBe(404);

    const revocations = sandbox.state.statsSnapshot().revocations;
    const aDeletes = await server.get(`/api/connections/${connectionId}`, {
      method: 'DELETE',
      headers: auth(a.apiKey),
    });
    expect(aDeletes.status).toBe(204);
    const asA = (await (await server.get('/api/connections', { headers: auth(a.apiKey) })).json()) as {
      data: unknown[];
    };
    expect(asA.data).toEqual([]);
    await until(
      async () => sandbox.state.statsSnapshot().revocations,
      (n) => n === revocations + 1,
      5000,
    );
  });
});
