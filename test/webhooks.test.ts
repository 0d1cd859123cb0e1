// Webhook deliveries end to end: an event recorded by the statement that causes it (never for a change
// that rolled back), delivered by the delivery tick to a receiver outside this process's app (an http
// server on 127.0.0.1, the development setting on), signed by Standard Webhooks, retried with back-off
// while the receiver is down, and refused at delivery for private and metadata addresses.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import type { DatabaseHandle } from '@honest-health/platform/db';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccessTokenCache } from '../src/app/connections/grants.js';
import { openDriver } from '../src/app/databases.js';
import { cancelPush } from '../src/app/invoices/control.js';
import { createOrganization } from '../src/app/organizations.js';
import { markForbidden } from '../src/app/push/signals.js';
import { pushDueInvoices } from '../src/app/push/tick.js';
import { type DeliveryDeps, deliverDueWebhooks } from '../src/app/webhooks/deliver.js';
import { createEndpoint } from '../src/app/webhooks/endpoints.js';
import { startXeroSandbox } from '../tools/xero-sandbox/server.js';
import { freshDatabase } from './support/databases.js';
import { type InProcessApp, startInProcess } from './support/in-process.js';
import { type Cluster, startCluster } from './support/postgres.js';
import {
  captureLog,
  connectedOrganization,
  openDatabase,
  pushTickDeps,
  queuePush,
  type Sandbox,
  testBox,
} from './support/ticks.js';

let cluster: Cluster;
let sandbox: Sandbox;
let box: SecretBox;
let url: string;
let handle: DatabaseHandle;
const { log } = captureLog();

interface Received {
  headers: Record<string, string>;
  body: string;
}

/** A receiver on 127.0.0.1: records every request, answers `status`. */
async function receiver(port = 0, status = 204) {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      received.push({ headers: req.headers as Record<string, string>, body });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  const { port: bound } = server.address() as AddressInfo;
  return {
    received,
    url: `http://127.0.0.1:${bound}/hook`,
    port: bound,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

beforeAll(async () => {
  [cluster, sandbox] = await Promise.all([startCluster(), startXeroSandbox({ port: 0 })]);
  box = await testBox();
  url = await freshDatabase(cluster);
  handle = await openDatabase(url, log);
});
afterAll(async () => {
  await handle?.close();
  await sandbox?.close();
  await cluster?.remove();
});

function deps(overrides: Partial<DeliveryDeps> = {}): DeliveryDeps {
  return {
    owner: `run-${crypto.randomUUID()}`,
    box,
    log,
    batchSize: 50,
    perEndpoint: 4,
    timeoutMs: 2000,
    maxResponseBytes: 64 * 1024,
    backoff: { baseMs: 20, maxMs: 200 },
    retryForMs: 3 * 24 * 3_600_000,
    allowInsecure: true,
    ...overrides,
  };
}

async function deliveries(endpointId: string) {
  const rows =
    await handle.db.execute(sql`SELECT status, attempts, last_error, last_status FROM webhook_deliveries
    WHERE endpoint_id = ${endpointId} ORDER BY created_at`);
  return (rows as unknown as { rows: { status: string; attempts: number; last_error: string | null }[] })
    .rows;
}

const until = async (cond: () => Promise<boolean>, ms = 10_000) => {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
};

describe('webhooks', () => {
  it('a drill: every event reaches the receiver, verifiable with standardwebhooks; none for a change that rolled back', async () => {
    const org = await createOrganization(handle.db, 'Hooked Co');
    const rx = await receiver();
    try {
      const endpoint = await createEndpoint(handle.db, box, org.id, rx.url);
      const ids = await Promise.all(['d-1', 'd-2', 'd-3'].map((k) => queuePush(handle.db, org.id, k)));
      await cancelPush(handle.db, org.id, ids[0] as string);
      await cancelPush(handle.db, org.id, ids[1] as string);
      // The third cancel rolls back: its event must never be sent.
      const client = new pg.Client(url);
      await client.connect();
      try {
        await client.query('BEGIN');
        expect(await cancelPush(drizzle({ client }), org.id, ids[2] as string)).toMatchObject({
          kind: 'changed',
        });
        await client.query('ROLLBACK');
      } finally {
        await client.end();
      }
      expect(await deliverDueWebhooks(handle.db, deps())).toMatchObject({ claimed: 2, delivered: 2 });
      expect(await deliverDueWebhooks(handle.db, deps())).toMatchObject({ claimed: 0 });

      const wh = new Webhook(endpoint.secret);
      const events = rx.received.map(
        (r) => wh.verify(r.body, r.headers) as { type: string; data: { id: string } },
      );
      expect(events.map((e) => e.type)).toEqual(['invoice.cancelled', 'invoice.cancelled']);
      expect(events.map((e) => e.data.id).sort()).toEqual([ids[0], ids[1]].sort());
      expect(events.map((e) => e.data.id)).not.toContain(ids[2]);
      expect(rx.received.every((r) => r.headers['content-type'] === 'application/json')).toBe(true);
      expect((await deliveries(endpoint.id)).map((d) => d.status)).toEqual(['delivered', 'delivered']);
    } finally {
      await rx.close();
    }
  });

  it('the push tick records invoice.pushed and invoice.dead with its settle; the receiver gets both', async () => {
    const { org } = await connectedOrganization(handle.db, box, sandbox, 'Drill Co', {
      accountCodes: undefined,
    });
    const rx = await receiver();
    try {
      const endpoint = await createEndpoint(handle.db, box, org.id, rx.url);
      const good = await queuePush(handle.db, org.id, 'drill-good');
      const bad = await queuePush(handle.db, org.id, 'drill-bad', {
        contact: { name: 'Customer' },
        lineItems: [{ description: 'Widget', quantity: '1', unitAmount: '1.00', accountCode: '4999' }],
        date: '2026-11-29',
        currency: 'NZD',
      });
      const tick = pushTickDeps(sandbox, box, log, { tokens: new AccessTokenCache() });
      expect(await pushDueInvoices(handle.db, tick)).toMatchObject({ pushed: 1, dead: 1 });
      await deliverDueWebhooks(handle.db, deps());
      const wh = new Webhook(endpoint.secret);
      const events = rx.received.map(
        (r) =>
          wh.verify(r.body, r.headers) as {
            type: string;
            data: { id: string; xeroInvoiceId: string | null };
          },
      );
      expect(Object.fromEntries(events.map((e) => [e.data.id, e.type]))).toEqual({
        [good]: 'invoice.pushed',
        [bad]: 'invoice.dead',
      });
      expect(events.find((e) => e.data.id === good)?.data.xeroInvoiceId).toBeTruthy();
    } finally {
      await rx.close();
    }
  });

  it('writes no event for an organization without an endpoint enabled: nothing could ever read it', async () => {
    const none = await connectedOrganization(handle.db, box, sandbox, 'No Endpoint Co');
    const disabled = await connectedOrganization(handle.db, box, sandbox, 'Disabled Endpoint Co');
    const rx = await receiver();
    try {
      const endpoint = await createEndpoint(handle.db, box, disabled.org.id, rx.url);
      await handle.db.execute(
        sql`UPDATE webhook_endpoints SET disabled_at = now() WHERE id = ${endpoint.id}`,
      );
      await queuePush(handle.db, none.org.id, 'no-endpoint');
      await queuePush(handle.db, disabled.org.id, 'disabled-endpoint');
      const tick = pushTickDeps(sandbox, box, log, { tokens: new AccessTokenCache() });
      expect(await pushDueInvoices(handle.db, tick)).toMatchObject({ pushed: 2 });
      const events = await handle.db.execute(
        sql`SELECT count(*)::int AS n FROM webhook_events
            WHERE organization_id IN (${none.org.id}, ${disabled.org.id})`,
      );
      expect((events as unknown as { rows: { n: number }[] }).rows[0]?.n).toBe(0);
    } finally {
      await rx.close();
    }
  });

  it('connection.needs_reauth once per connection it happens to, in the statement that marks it', async () => {
    const { org, connectionId, tenantId } = await connectedOrganization(handle.db, box, sandbox, 'Reauth Co');
    const rx = await receiver();
    try {
      const endpoint = await createEndpoint(handle.db, box, org.id, rx.url);
      await markForbidden(handle.db, new Map([[connectionId, 'Xero answered 403']]));
      // Already marked: no second event.
      await markForbidden(handle.db, new Map([[connectionId, 'Xero answered 403 again']]));
      await deliverDueWebhooks(handle.db, deps());
      const wh = new Webhook(endpoint.secret);
      const events = rx.received.map((r) => wh.verify(r.body, r.headers));
      expect(events).toMatchObject([
        {
          type: 'connection.needs_reauth',
          data: { id: connectionId, tenantId, reason: 'Xero answered 403' },
        },
      ]);
    } finally {
      await rx.close();
    }
  });

  it('with the receiver down, every event arrives after it returns (back-off compressed)', async () => {
    const org = await createOrganization(handle.db, 'Down Co');
    const first = await receiver();
    const port = first.port;
    await first.close();
    const endpoint = await createEndpoint(handle.db, box, org.id, `http://127.0.0.1:${port}/hook`);
    const ids = await Promise.all(['down-1', 'down-2', 'down-3'].map((k) => queuePush(handle.db, org.id, k)));
    for (const id of ids) await cancelPush(handle.db, org.id, id);
    for (let i = 0; i < 3; i++) {
      await deliverDueWebhooks(handle.db, deps());
      await new Promise((r) => setTimeout(r, 60));
    }
    const down = await deliveries(endpoint.id);
    expect(down.every((d) => d.status === 'failed' && d.attempts >= 2)).toBe(true);
    expect(down[0]?.last_error).toMatch(/could not connect/);

    const back = await receiver(port);
    try {
      await until(async () => {
        await deliverDueWebhooks(handle.db, deps());
        return (await deliveries(endpoint.id)).every((d) => d.status === 'delivered');
      });
      const wh = new Webhook(endpoint.secret);
      const got = new Set(
        back.received.map((r) => (wh.verify(r.body, r.headers) as { data: { id: string } }).data.id),
      );
      expect([...got].sort()).toEqual([...ids].sort());
    } finally {
      await back.close();
    }
  });

  it('after the retry period the delivery is dead and the endpoint disabled, with a reason the customer can read', async () => {
    const org = await createOrganization(handle.db, 'Gone Co');
    const gone = await receiver();
    await gone.close();
    const endpoint = await createEndpoint(handle.db, box, org.id, gone.url);
    await cancelPush(handle.db, org.id, await queuePush(handle.db, org.id, 'gone-1'));
    await handle.db.execute(
      sql`UPDATE webhook_events SET created_at = now() - interval '1 hour' WHERE organization_id = ${org.id}`,
    );
    await deliverDueWebhooks(handle.db, deps({ retryForMs: 60_000 }));
    expect(await deliveries(endpoint.id)).toMatchObject([{ status: 'dead' }]);
    const rows = await handle.db.execute(
      sql`SELECT disabled_at, disabled_reason FROM webhook_endpoints WHERE id = ${endpoint.id}`,
    );
    const row = (rows as unknown as { rows: { disabled_at: Date | null; disabled_reason: string }[] })
      .rows[0];
    expect(row?.disabled_at).not.toBeNull();
    expect(row?.disabled_reason).toMatch(/could not connect/);
    // A disabled endpoint gets no new deliveries.
    await cancelPush(handle.db, org.id, await queuePush(handle.db, org.id, 'gone-2'));
    expect(await deliveries(endpoint.id)).toHaveLength(1);
  });

  it('refuses at delivery an endpoint on a private or metadata address, or a name resolving to loopback: nothing is sent', async () => {
    const org = await createOrganization(handle.db, 'Sneaky Co');
    const rx = await receiver();
    try {
      // Rows as a looser release, or a hand edit, could have left them: the delivery checks again.
      const targets = [
        'https://10.0.0.1/hook',
        'https://169.254.169.254/latest',
        'https://[::1]/hook',
        `http://hooks.example.test:${rx.port}/hook`,
      ];
      const endpoints = [];
      for (const t of targets) endpoints.push(await createEndpoint(handle.db, box, org.id, t));
      await cancelPush(handle.db, org.id, await queuePush(handle.db, org.id, 'sneaky-1'));
      const sent: string[] = [];
      const spy: typeof fetch = (input, init) => {
        sent.push(String(input));
        return fetch(input, init);
      };
      // The name resolves to 127.0.0.1; the development setting is off, so https-only applies too.
      const resolve = async (host: string) => (host === 'hooks.example.test' ? ['127.0.0.1'] : []);
      await deliverDueWebhooks(handle.db, deps({ allowInsecure: false, fetch: spy, resolve }));
      expect(sent).toEqual([]);
      expect(rx.received).toHaveLength(0);
      const errors = await Promise.all(endpoints.map(async (e) => (await deliveries(e.id))[0]?.last_error));
      expect(errors[0]).toMatch(/refused: .*private/);
      expect(errors[1]).toMatch(/refused: .*metadata/);
      expect(errors[2]).toMatch(/refused: .*loopback/);
      expect(errors[3]).toMatch(/refused: .*https/);
      // With https allowed through (a name resolving to loopback, nothing else wrong): still refused.
      const named = await createEndpoint(handle.db, box, org.id, 'https://hooks.example.test/hook');
      await cancelPush(handle.db, org.id, await queuePush(handle.db, org.id, 'sneaky-2'));
      await deliverDueWebhooks(handle.db, deps({ allowInsecure: false, fetch: spy, resolve }));
      expect((await deliveries(named.id))[0]?.last_error).toMatch(
        /resolves to a loopback address \(127\.0\.0\.1\)/,
      );
      expect(sent).toEqual([]);
    } finally {
      await rx.close();
    }
  });
});

describe('/api/webhook-endpoints', () => {
  const apps: InProcessApp[] = [];
  afterAll(async () => {
    for (const a of apps) await a.close();
  });
  async function appWith(env: Record<string, string>) {
    const driver = openDriver(loadConfig({ DATABASE_URL: url }), log);
    await driver.ready();
    const a = await startInProcess({ driver, env });
    apps.push(a);
    return a;
  }
  const send = (a: InProcessApp, key: string, method: string, path: string, body?: unknown) =>
    a.request(`/api/webhook-endpoints${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  it('refuses at registration private, metadata, loopback and plain-http receivers, naming the field', async () => {
    const prod = await appWith({});
    const org = await createOrganization(handle.db, 'Register Co');
    await prod.reloadIndexes();
    for (const target of [
      'https://10.0.0.1/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://[::1]/hook',
      'https://[::ffff:127.0.0.1]/hook',
      'https://localhost/hook',
      'http://example.com/hook',
      'https://100.64.1.1/hook',
    ]) {
      const res = await send(prod, org.apiKey, 'POST', '', { url: target });
      expect(res.status, target).toBe(422);
      expect(await res.json()).toMatchObject({
        error: { code: 'validation_failed', fields: [{ path: 'url' }] },
      });
    }
    expect((await send(prod, org.apiKey, 'POST', '', { url: 42 })).status).toBe(422);
    expect((await send(prod, org.apiKey, 'POST', '', { url: 'https://example.com/', extra: 1 })).status).toBe(
      422,
    );
    const malformed = await prod.request('/api/webhook-endpoints', {
      method: 'POST',
      headers: { authorization: `Bearer ${org.apiKey}`, 'content-type': 'application/json' },
      body: '{',
    });
    expect(malformed.status).toBe(400);
    // With the development setting, loopback is allowed; private and metadata addresses still are not.
    const dev = await appWith({ WEBHOOK_ALLOW_INSECURE: 'true' });
    await dev.reloadIndexes();
    expect((await send(dev, org.apiKey, 'POST', '', { url: 'http://10.0.0.1/hook' })).status).toBe(422);
    expect((await send(dev, org.apiKey, 'POST', '', { url: 'http://169.254.169.254/' })).status).toBe(422);
    expect((await send(dev, org.apiKey, 'POST', '', { url: 'http://127.0.0.1:9/hook' })).status).toBe(201);
  });

  it('register, list, rotate with an overlap (both secrets sign), the delivery log, a resend, delete', async () => {
    const dev = await appWith({ WEBHOOK_ALLOW_INSECURE: 'true' });
    const org = await createOrganization(handle.db, 'Lifecycle Co');
    await dev.reloadIndexes();
    const rx = await receiver();
    try {
      const created = await send(dev, org.apiKey, 'POST', '', { url: rx.url });
      expect(created.status).toBe(201);
      const endpoint = (await created.json()) as { id: string; secret: string };
      expect(endpoint.secret).toMatch(/^whsec_/);
      const listed = (await (await send(dev, org.apiKey, 'GET', '')).json()) as {
        data: Record<string, unknown>[];
      };
      expect(listed.data).toHaveLength(1);
      expect(listed.data[0]).not.toHaveProperty('secret');

      const rotated = (await (
        await send(dev, org.apiKey, 'POST', `/${endpoint.id}/rotate-secret`)
      ).json()) as {
        secret: string;
      };
      expect(rotated.secret).not.toBe(endpoint.secret);
      await cancelPush(handle.db, org.id, await queuePush(handle.db, org.id, 'life-1'));
      await deliverDueWebhooks(handle.db, deps());
      const [got] = rx.received;
      expect(got?.headers['webhook-signature']?.split(' ')).toHaveLength(2);
      for (const secret of [endpoint.secret, rotated.secret]) {
        expect(new Webhook(secret).verify(got?.body ?? '', got?.headers ?? {})).toMatchObject({
          type: 'invoice.cancelled',
        });
      }

      const log = (await (await send(dev, org.apiKey, 'GET', `/${endpoint.id}/deliveries`)).json()) as {
        data: { id: string; status: string; type: string }[];
      };
      expect(log.data).toMatchObject([{ status: 'delivered', type: 'invoice.cancelled' }]);
      const resend = await send(
        dev,
        org.apiKey,
        'POST',
        `/${endpoint.id}/deliveries/${log.data[0]?.id}/resend`,
      );
      expect(resend.status).toBe(202);
      await deliverDueWebhooks(handle.db, deps());
      expect(rx.received).toHaveLength(2);
      expect(rx.received[1]?.headers['webhook-id']).toBe(got?.headers['webhook-id']);

      expect((await send(dev, org.apiKey, 'DELETE', `/${endpoint.id}`)).status).toBe(204);
      expect(rx.received).toHaveLength(2);
      expect((await send(dev, org.apiKey, 'GET', `/${endpoint.id}/deliveries`)).status).toBe(404);
      const other = await createOrganization(handle.db, 'Other Co');
      await dev.reloadIndexes();
      expect((await send(dev, other.apiKey, 'DELETE', `/${endpoint.id}`)).status).toBe(404);
    } finally {
      await rx.close();
    }
  });
});

describe('connection.disconnected', () => {
  it('is written by the DELETE of the connection, and delivered', async () => {
    const driver = openDriver(loadConfig({ DATABASE_URL: url }), log);
    await driver.ready();
    const app = await startInProcess({ driver });
    const { org, connectionId } = await connectedOrganization(handle.db, box, sandbox, 'Leaving Co');
    await app.reloadIndexes();
    const rx = await receiver();
    try {
      const endpoint = await createEndpoint(handle.db, box, org.id, rx.url);
      const res = await app.request(`/api/connections/${connectionId}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${org.apiKey}` },
      });
      expect(res.status).toBe(204);
      await app.background();
      await deliverDueWebhooks(handle.db, deps());
      const wh = new Webhook(endpoint.secret);
      expect(rx.received.map((r) => wh.verify(r.body, r.headers))).toMatchObject([
        { type: 'connection.disconnected', data: { id: connectionId } },
      ]);
    } finally {
      await rx.close();
      await app.close();
    }
  });
});
