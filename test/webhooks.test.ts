// Webhook deliveries end to end: an event recorded by the statement that causes it (never for a change
// that rolled back), delivered by the delivery tick to a receiver outside this process's app (an http
// server on 127.0.0.1, the development setting on), signed by Standard Webhooks, retried with back-off
// while the receiver is down, and refused at delivery for private and metadata addresses.

import { execFile } from 'node:child_process';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import type { DatabaseHandle } from '@honest-health/platform/db';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { AccessTokenCache } from '../src/app/connections/grants.js';
import { openDriver } from '../src/app/databases.js';
import { cancelPush } from '../src/app/invoices/control.js';
import { createOrganization } from '../src/app/organizations.js';
import { markForbidden } from '../src/app/push/signals.js';
import { pushDueInvoices } from '../src/app/push/tick.js';
import { type DeliveryDeps, deliverDueWebhooks } from '../src/app/webhooks/deliver.js';
import { createEndpoint } from '../src/app/webhooks/endpoints.js';
import { pinnedSender } from '../src/app/webhooks/pinned-send.js';
import { pruneWebhooks } from '../src/app/webhooks/prune.js';
import type { Sender } from '../src/app/webhooks/send.js';
import { migratedDatabase } from './support/databases.js';
import { type InProcessApp, startInProcess } from './support/in-process.js';
import type { Cluster } from './support/postgres.js';
import { sharedCluster } from './support/shared-postgres.js';
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
const execFileAsync = promisify(execFile);
const PROBE = 'test/support/pinned-send-probe.ts';

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

/** A receiver that reads each request and answers none until release(); then it answers every one 204. */
async function holdingReceiver() {
  const open: ServerResponse[] = [];
  let received = 0;
  let maxOpen = 0;
  let released = false;
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received += 1;
      if (released) return void res.writeHead(204).end();
      open.push(res);
      maxOpen = Math.max(maxOpen, open.length);
      res.on('close', () => {
        const at = open.indexOf(res);
        if (at >= 0) open.splice(at, 1);
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    open,
    get received() {
      return received;
    },
    get maxOpen() {
      return maxOpen;
    },
    release() {
      released = true;
      for (const res of [...open]) res.writeHead(204).end();
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** The pinned sender as the development setting runs it, on literal 127.0.0.1 receivers (no lookup). */
const loopback = async () => ['127.0.0.1'];

beforeAll(async () => {
  [cluster, sandbox] = await Promise.all([sharedCluster(), startXeroSandbox({ port: 0 })]);
  box = await testBox();
  url = await migratedDatabase(cluster);
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
    concurrency: 50,
    perEndpoint: 4,
    windowMs: 2000,
    pollMs: 25,
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

/** Disables every endpoint so far: a test that counts claims sees only its own deliveries. */
const quietOthers = () =>
  handle.db.execute(sql`UPDATE webhook_endpoints SET disabled_at = now() WHERE disabled_at IS NULL`);

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
      const asked: string[] = [];
      // The name resolves to 127.0.0.1; the development setting is off, so https-only applies too.
      const resolve = async (host: string) => {
        asked.push(host);
        return host === 'hooks.example.test' ? ['127.0.0.1'] : [];
      };
      const pinned = pinnedSender(resolve);
      const spy: Sender = (target, request) => {
        sent.push(String(target));
        return pinned(target, request);
      };
      await deliverDueWebhooks(handle.db, deps({ allowInsecure: false, send: spy }));
      expect(sent).toEqual([]);
      expect(rx.received).toHaveLength(0);
      const errors = await Promise.all(endpoints.map(async (e) => (await deliveries(e.id))[0]?.last_error));
      expect(errors[0]).toMatch(/refused: .*private/);
      expect(errors[1]).toMatch(/refused: .*metadata/);
      expect(errors[2]).toMatch(/refused: .*loopback/);
      expect(errors[3]).toMatch(/refused: .*https/);
      // Registered under the development setting, delivered without it: an https name resolving to
      // loopback is refused as the socket resolves it, before it connects.
      const named = await createEndpoint(handle.db, box, org.id, 'https://hooks.example.test/hook');
      await cancelPush(handle.db, org.id, await queuePush(handle.db, org.id, 'sneaky-2'));
      await deliverDueWebhooks(handle.db, deps({ allowInsecure: false, send: spy }));
      expect((await deliveries(named.id))[0]?.last_error).toMatch(
        /refused: hooks\.example\.test resolves to a loopback address \(127\.0\.0\.1\)/,
      );
      expect(asked).toEqual(['hooks.example.test']);
      expect(rx.received).toHaveLength(0);
    } finally {
      await rx.close();
    }
  });

  it('DNS pinning: the name is resolved once, every answer checked, and the socket connects to the checked address', async () => {
    await quietOthers();
    const org = await createOrganization(handle.db, 'Pinned Co');
    const rx = await receiver();
    try {
      // A rebinding name: loopback (allowed by the development setting) first, then a metadata address.
      // The system resolver knows neither name: the request can only reach the receiver through ours.
      const asked: string[] = [];
      const rebinding = async (host: string) => {
        asked.push(host);
        return asked.length === 1 ? ['127.0.0.1'] : ['169.254.169.254'];
      };
      const pinned = await createEndpoint(
        handle.db,
        box,
        org.id,
        `http://rebind.example.test:${rx.port}/hook`,
      );
      await cancelPush(handle.db, org.id, await queuePush(handle.db, org.id, 'pin-1'));
      await deliverDueWebhooks(handle.db, deps({ send: pinnedSender(rebinding) }));
      expect(await deliveries(pinned.id)).toMatchObject([{ status: 'delivered' }]);
      expect(asked).toEqual(['rebind.example.test']);
      expect(rx.received.map((r) => r.headers.host)).toEqual([`rebind.example.test:${rx.port}`]);

      // The other order: a private answer is refused even though a second lookup would be loopback; a
      // name with one refused answer among allowed ones is refused too.
      await handle.db.execute(sql`DELETE FROM webhook_endpoints WHERE id = ${pinned.id}`);
      const evil = await createEndpoint(handle.db, box, org.id, `http://evil.example.test:${rx.port}/hook`);
      const answers = [['127.0.0.1', '10.0.0.7'], ['127.0.0.1']];
      const turned = async () => answers.shift() ?? ['127.0.0.1'];
      await cancelPush(handle.db, org.id, await queuePush(handle.db, org.id, 'pin-2'));
      await deliverDueWebhooks(handle.db, deps({ send: pinnedSender(turned) }));
      expect((await deliveries(evil.id))[0]?.last_error).toMatch(
        /resolves to a private address \(10\.0\.0\.7\)/,
      );
      expect(answers).toHaveLength(1);
      expect(rx.received).toHaveLength(1);
    } finally {
      await rx.close();
    }
  });

  it('DNS pinning under the real bun binary too: its node:http honours the checked lookup', async () => {
    const rx = await receiver();
    try {
      // Asynchronously: the receiver answers from this process's event loop.
      const probe = async (target: string, answers: string) =>
        JSON.parse(
          (await execFileAsync(resolve('node_modules/.bin/bun'), [PROBE, target, answers])).stdout,
        ) as { status?: number; error?: string; message?: string; asked: string[] };
      // The system resolver knows neither name: only the checked answer can reach the receiver.
      expect(await probe(`http://bun.example.test:${rx.port}/hook`, '127.0.0.1')).toEqual({
        status: 204,
        asked: ['bun.example.test'],
      });
      expect(rx.received.map((r) => r.headers.host)).toEqual([`bun.example.test:${rx.port}`]);
      expect(
        await probe(`http://bun.example.test:${rx.port}/hook`, '127.0.0.1,169.254.169.254'),
      ).toMatchObject({
        error: 'RefusedAddressError',
        message: 'bun.example.test resolves to a metadata address (169.254.169.254)',
      });
      expect(rx.received).toHaveLength(1);
    } finally {
      await rx.close();
    }
  });

  it("a hanging endpoint holds only its own deliveries: another organization's event is delivered while it hangs", async () => {
    await quietOthers();
    const [slowOrg, fastOrg] = [
      await createOrganization(handle.db, 'Hanging Co'),
      await createOrganization(handle.db, 'Prompt Co'),
    ];
    const hang = await holdingReceiver();
    const rx = await receiver();
    try {
      const slow = await createEndpoint(handle.db, box, slowOrg.id, hang.url);
      const fast = await createEndpoint(handle.db, box, fastOrg.id, rx.url);
      for (const k of ['hang-1', 'hang-2', 'hang-3', 'hang-4', 'hang-5'])
        await cancelPush(handle.db, slowOrg.id, await queuePush(handle.db, slowOrg.id, k));
      // A timeout and a window far longer than the test: only the receiver lets go of the slow requests.
      const long = { timeoutMs: 120_000, windowMs: 120_000, perEndpoint: 2 };
      const run = deliverDueWebhooks(handle.db, deps({ ...long, send: pinnedSender(loopback) }));
      await until(async () => hang.open.length === 2);
      // The other organization's event exists only now, after the run claimed and is held by the slow
      // endpoint: the same run claims it and delivers it while the slow requests are still open.
      await cancelPush(handle.db, fastOrg.id, await queuePush(handle.db, fastOrg.id, 'prompt-1'));
      await until(async () => rx.received.length === 1);
      expect(await deliveries(fast.id)).toMatchObject([{ status: 'delivered' }]);
      expect(hang.open).toHaveLength(2);
      expect(hang.received).toBe(2);
      // Another run (a second replica) takes none of the slow endpoint's: its live leases count.
      expect(await deliverDueWebhooks(handle.db, deps({ ...long, windowMs: 0 }))).toMatchObject({
        claimed: 0,
      });
      hang.release();
      expect(await run).toMatchObject({ claimed: 6, delivered: 6, failed: 0 });
      expect(hang.maxOpen).toBe(2);
      expect((await deliveries(slow.id)).map((d) => d.status)).toEqual(Array(5).fill('delivered'));
    } finally {
      hang.release();
      await Promise.all([hang.close(), rx.close()]);
    }
  });

  it('an endpoint that never answers fails after the timeout, with the reason in the log', async () => {
    await quietOthers();
    const org = await createOrganization(handle.db, 'Silent Co');
    const hang = await holdingReceiver();
    try {
      const endpoint = await createEndpoint(handle.db, box, org.id, hang.url);
      await cancelPush(handle.db, org.id, await queuePush(handle.db, org.id, 'silent-1'));
      const result = await deliverDueWebhooks(
        handle.db,
        deps({ timeoutMs: 300, send: pinnedSender(loopback) }),
      );
      expect(result).toMatchObject({ claimed: 1, failed: 1 });
      expect(await deliveries(endpoint.id)).toMatchObject([
        { status: 'failed', last_error: 'no answer within 300 ms' },
      ]);
    } finally {
      hang.release();
      await hang.close();
    }
  });

  it('retention deletes delivered and dead deliveries and events past it, in batches; never one still to send or leased', async () => {
    const org = await createOrganization(handle.db, 'Old Co');
    const endpoint = await createEndpoint(handle.db, box, org.id, 'https://hooks.example.com/old');
    const make = async (status: string, days: number, leased = false) => {
      const rows = await handle.db.execute(sql`
        WITH e AS (INSERT INTO webhook_events (organization_id, type, data, created_at)
                   VALUES (${org.id}, 'invoice.cancelled', '{}'::jsonb, now() - ${days} * interval '1 day') RETURNING id)
        INSERT INTO webhook_deliveries (event_id, endpoint_id, status, created_at, updated_at, lease_owner, lease_expires_at)
        SELECT e.id, ${endpoint.id}, ${status}, now() - ${days} * interval '1 day', now() - ${days} * interval '1 day',
               ${leased ? 'run-x' : null}, ${leased ? sql`now() + interval '1 minute'` : null}
        FROM e RETURNING event_id`);
      return (rows as unknown as { rows: { event_id: string }[] }).rows[0]?.event_id as string;
    };
    const gone = [
      await make('delivered', 40),
      await make('delivered', 35),
      await make('dead', 31),
      await make('delivered', 45),
      await make('dead', 50),
    ];
    const kept = [
      await make('delivered', 29),
      await make('pending', 60),
      await make('failed', 60),
      await make('delivered', 60, true),
    ];
    // An old event whose endpoint was deleted has no delivery left: it goes too.
    const orphan = (
      (await handle.db.execute(sql`INSERT INTO webhook_events (organization_id, type, data, created_at)
        VALUES (${org.id}, 'invoice.cancelled', '{}'::jsonb, now() - interval '90 days') RETURNING id`)) as unknown as {
        rows: { id: string }[];
      }
    ).rows[0]?.id as string;
    const ids = async () =>
      (
        (await handle.db.execute(
          sql`SELECT id FROM webhook_events WHERE organization_id = ${org.id}`,
        )) as unknown as { rows: { id: string }[] }
      ).rows.map((r) => r.id);

    // Two rows a statement, two statements a run: a run stops at its bound.
    expect(await pruneWebhooks(handle.db, { retentionDays: 30, batchSize: 2, maxBatches: 2 })).toEqual({
      deliveries: 4,
      events: 4,
    });
    expect(await pruneWebhooks(handle.db, { retentionDays: 30, batchSize: 2, maxBatches: 2 })).toEqual({
      deliveries: 1,
      events: 2,
    });
    expect(await pruneWebhooks(handle.db, { retentionDays: 30, batchSize: 2, maxBatches: 2 })).toEqual({
      deliveries: 0,
      events: 0,
    });
    const left = await ids();
    expect(left.sort()).toEqual([...kept].sort());
    expect(left).not.toContain(orphan);
    for (const g of gone) expect(left).not.toContain(g);
    expect(await deliveries(endpoint.id)).toHaveLength(4);
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

  it('the delivery log pages by keyset: nextCursor until the last page; a bad cursor or limit is a 400 naming the field', async () => {
    const app = await appWith({ WEBHOOK_ALLOW_INSECURE: 'true' });
    const org = await createOrganization(handle.db, 'Paged Co');
    await app.reloadIndexes();
    const endpoint = await createEndpoint(handle.db, box, org.id, 'https://hooks.example.com/paged');
    // Seven deliveries, three sharing one creation time: the cursor's id breaks the tie.
    await handle.db.execute(sql`
      WITH e AS (INSERT INTO webhook_events (organization_id, type, data)
                 SELECT ${org.id}, 'invoice.cancelled', '{}'::jsonb FROM generate_series(1, 7) RETURNING id)
      INSERT INTO webhook_deliveries (event_id, endpoint_id, created_at)
      SELECT id, ${endpoint.id}, CASE WHEN row_number() OVER () <= 3 THEN '2026-01-01T00:00:00.123456Z'::timestamptz
                                      ELSE now() - row_number() OVER () * interval '1 second' END FROM e`);
    const all = (
      (await handle.db.execute(sql`SELECT id FROM webhook_deliveries WHERE endpoint_id = ${endpoint.id}
        ORDER BY created_at DESC, id DESC`)) as unknown as { rows: { id: string }[] }
    ).rows.map((r) => r.id);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await send(
        app,
        org.apiKey,
        'GET',
        `/${endpoint.id}/deliveries?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      expect(res.status).toBe(200);
      const page = (await res.json()) as { data: { id: string }[]; nextCursor: string | null };
      expect(page.data.length).toBeLessThanOrEqual(2);
      expect(page.data[0]).not.toHaveProperty('cursorAt');
      seen.push(...page.data.map((d) => d.id));
      cursor = page.nextCursor;
      pages += 1;
    } while (cursor && pages < 10);
    expect(pages).toBe(4);
    expect(seen).toEqual(all);
    const whole = (await (await send(app, org.apiKey, 'GET', `/${endpoint.id}/deliveries`)).json()) as {
      data: unknown[];
      nextCursor: string | null;
    };
    expect(whole).toMatchObject({ nextCursor: null });
    expect(whole.data).toHaveLength(7);

    for (const [query, path] of [
      ['cursor=not-a-cursor', 'cursor'],
      [`cursor=${btoa(JSON.stringify(['yesterday', 'x']))}`, 'cursor'],
      ['limit=0', 'limit'],
      ['limit=201', 'limit'],
      ['limit=two', 'limit'],
      ['sort=asc', 'sort'],
    ]) {
      const res = await send(app, org.apiKey, 'GET', `/${endpoint.id}/deliveries?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/application\/json/);
      expect(await res.json(), query).toMatchObject({
        error: { code: 'invalid_query', fields: [{ path }] },
      });
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
