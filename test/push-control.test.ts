// Retry and cancel of a push (POST /api/invoices/{id}/retry and /cancel): the API in process over a real
// Postgres cluster, the push tick against the Xero sandbox, and each transition raced against the claim.

import { loadConfig } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import type { DatabaseHandle } from '@honest-health/platform/db';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { AccessTokenCache } from '../src/app/connections/grants.js';
import { openDriver } from '../src/app/databases.js';
import { cancelPush } from '../src/app/invoices/control.js';
import { XERO_BUDGET } from '../src/app/push/budget.js';
import { claimPushes } from '../src/app/push/claim.js';
import { KEY_RESEND_WITHIN_MS, type PushTickDeps, pushDueInvoices } from '../src/app/push/tick.js';
import type { XeroClient } from '../src/app/xero/client.js';
import { migratedDatabase } from './support/databases.js';
import { type InProcessApp, startInProcess } from './support/in-process.js';
import type { Cluster } from './support/postgres.js';
import { sharedCluster } from './support/shared-postgres.js';
import {
  captureLog,
  connectedOrganization,
  openDatabase,
  pushRow,
  pushTickDeps,
  queuePush,
  recordingClient,
  type Sandbox,
  testBox,
} from './support/ticks.js';

let cluster: Cluster;
let sandbox: Sandbox;
let box: SecretBox;
let url: string;
let handle: DatabaseHandle;
let app: InProcessApp;
const { log } = captureLog();

beforeAll(async () => {
  [cluster, sandbox] = await Promise.all([sharedCluster(), startXeroSandbox({ port: 0 })]);
  box = await testBox();
  url = await migratedDatabase(cluster);
  handle = await openDatabase(url, log);
  const driver = openDriver(loadConfig({ DATABASE_URL: url }), log);
  await driver.ready();
  app = await startInProcess({ driver });
});
afterAll(async () => {
  await app?.close();
  await handle?.close();
  await sandbox?.close();
  await cluster?.remove();
});

function deps(xero: XeroClient, overrides: Partial<PushTickDeps> = {}): PushTickDeps {
  return pushTickDeps(sandbox, box, log, { xero, tokens: new AccessTokenCache(), ...overrides });
}

const created = (tenantId: string) => sandbox.state.statsSnapshot().invoicesCreated[tenantId] ?? 0;

let org = 0;
/** An organization of its own on a fresh sandbox tenant, its API key known to the in-process app. */
async function organization(options?: Parameters<typeof connectedOrganization>[4]) {
  const connected = await connectedOrganization(handle.db, box, sandbox, `Control Co ${++org}`, options);
  await app.reloadIndexes();
  return connected;
}

function call(apiKey: string, id: string, action: 'retry' | 'cancel', key?: string) {
  return app.request(`/api/invoices/${id}/${action}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, ...(key === undefined ? {} : { 'idempotency-key': key }) },
  });
}

/** Sets columns of a push straight in the database: the states a tick leaves behind. */
async function setPush(id: string, set: ReturnType<typeof sql>) {
  await handle.db.execute(sql`UPDATE invoice_pushes SET ${set} WHERE id = ${id}`);
}

/** `ms` pass for both sides: the sandbox's clock, and this push's key age in our database. */
async function elapse(id: string, ms: number) {
  sandbox.state.clock.advance(ms);
  await setPush(id, sql`xero_key_sent_at = xero_key_sent_at - ${ms} * interval '1 millisecond'`);
}

describe('POST /api/invoices/{id}/retry', () => {
  it('a dead push whose answer was lost is retried under the same key inside Xero’s window: one invoice', async () => {
    const { org, tenantId } = await organization();
    const id = await queuePush(handle.db, org.id, 'lost-1');
    const { xero, calls } = recordingClient(sandbox);
    sandbox.state.faults.add({ target: 'invoices', kind: 'drop', count: 1 });
    expect(await pushDueInvoices(handle.db, deps(xero, { maxAttempts: 1 }))).toMatchObject({ dead: 1 });
    expect(await pushRow(url, id)).toMatchObject({ status: 'dead', xero_in_doubt: true });
    expect(created(tenantId)).toBe(1);

    const res = await call(org.apiKey, id, 'retry', 'retry-lost-1');
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ id, status: 'queued', attempts: 0, lastError: null });
    // The old key may have created the invoice: it stays, in doubt.
    expect(await pushRow(url, id)).toMatchObject({
      status: 'queued',
      xero_key_generation: 0,
      xero_in_doubt: true,
    });
    expect(app.scheduled).toContain('push-invoices');

    expect(await pushDueInvoices(handle.db, deps(xero))).toMatchObject({ pushed: 1 });
    expect(calls).toEqual([`PUT ${id}`, `PUT ${id}`]);
    expect(created(tenantId)).toBe(1);
    expect(await pushRow(url, id)).toMatchObject({ status: 'pushed', xero_in_doubt: false });
  });

  it('after the key expired, the retried push is looked up by its marker, found, and not made again', async () => {
    const { org, tenantId } = await organization();
    const id = await queuePush(handle.db, org.id, 'lost-2');
    const { xero, calls } = recordingClient(sandbox);
    sandbox.state.faults.add({ target: 'invoices', kind: 'drop', count: 1 });
    await pushDueInvoices(handle.db, deps(xero, { maxAttempts: 1 }));
    expect((await call(org.apiKey, id, 'retry', 'retry-lost-2')).status).toBe(202);
    await elapse(id, KEY_RESEND_WITHIN_MS + 2 * 60_000);

    expect(await pushDueInvoices(handle.db, deps(xero))).toMatchObject({ pushed: 1 });
    const row = await pushRow(url, id);
    expect(calls).toEqual([`PUT ${id}`, `GET ${row.xero_marker}`]);
    expect(created(tenantId)).toBe(1);
    expect(row.status).toBe('pushed');
  });

  it('a push Xero rejected is retried under the next key, and lands once', async () => {
    // The sandbox's default chart of accounts, which has no 4999.
    const { org, tenantId } = await organization({ accountCodes: undefined });
    const id = await queuePush(handle.db, org.id, 'rejected-1', {
      contact: { name: 'Customer' },
      lineItems: [{ description: 'Widget', quantity: '1', unitAmount: '10.00', accountCode: '4999' }],
      date: '2026-11-29',
      currency: 'NZD',
    });
    const { xero, calls } = recordingClient(sandbox);
    expect(await pushDueInvoices(handle.db, deps(xero))).toMatchObject({ dead: 1 });
    expect(await pushRow(url, id)).toMatchObject({ status: 'dead', xero_in_doubt: false });
    // The customer adds the account in Xero, then retries.
    sandbox.state.tenants.get(tenantId)?.accountCodes?.add('4999');
    expect((await call(org.apiKey, id, 'retry', 'retry-rejected-1')).status).toBe(202);
    expect(await pushRow(url, id)).toMatchObject({
      xero_key_generation: 1,
      xero_in_doubt: false,
      xero_key_sent_at: null,
    });

    expect(await pushDueInvoices(handle.db, deps(xero))).toMatchObject({ pushed: 1 });
    expect(calls).toEqual([`PUT ${id}`, `PUT ${id}:1`]);
    expect(created(tenantId)).toBe(1);
  });

  it('a failed push skips its back-off; a release that recorded no sends leaves it in doubt from its creation', async () => {
    const { org } = await organization();
    const id = await queuePush(handle.db, org.id, 'failed-1');
    await setPush(id, sql`status = 'failed', attempts = 3, next_attempt_at = now() + interval '1 hour'`);
    expect((await call(org.apiKey, id, 'retry', 'retry-failed-1')).status).toBe(202);
    const row = await pushRow(url, id);
    expect(row).toMatchObject({ status: 'queued', attempts: 0, xero_key_generation: 0, xero_in_doubt: true });
    expect(row.xero_key_sent_at).toEqual(row.created_at);
    expect(row.next_attempt_at.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
  });

  it('is idempotent under its Idempotency-Key: a replay requeues nothing; the key on another push is a 409', async () => {
    const { org } = await organization();
    const id = await queuePush(handle.db, org.id, 'replay-1');
    const other = await queuePush(handle.db, org.id, 'replay-2');
    await setPush(id, sql`status = 'dead', attempts = 12`);
    expect((await call(org.apiKey, id, 'retry', 'k-replay')).status).toBe(202);
    // It fails again meanwhile; the replay answers with the push as it is, and changes nothing.
    await setPush(id, sql`status = 'dead', attempts = 12`);
    const replay = await call(org.apiKey, id, 'retry', 'k-replay');
    expect(replay.status).toBe(200);
    expect(await replay.json()).toMatchObject({ id, status: 'dead', attempts: 12 });
    await setPush(other, sql`status = 'dead'`);
    const conflict = await call(org.apiKey, other, 'retry', 'k-replay');
    expect(conflict.status).toBe(409);
    expect(await conflict.json()).toMatchObject({ error: { code: 'idempotency_conflict' } });
    expect(await pushRow(url, other)).toMatchObject({ status: 'dead' });
  });

  it('two concurrent retries under one key requeue once, and both answer for the push', async () => {
    const { org } = await organization();
    const id = await queuePush(handle.db, org.id, 'twice-1');
    await setPush(id, sql`status = 'dead'`);
    const answers = await Promise.all([1, 2, 3].map(() => call(org.apiKey, id, 'retry', 'k-twice')));
    expect(answers.map((r) => r.status).sort()).toEqual([200, 200, 202]);
    const rows = await handle.db.execute(
      sql`SELECT count(*)::int AS n FROM invoice_push_retries WHERE push_id = ${id}`,
    );
    expect((rows as unknown as { rows: { n: number }[] }).rows[0]?.n).toBe(1);
  });

  it('refuses with a 409 naming the state: pushed, queued, cancelled, and a push in flight', async () => {
    const { org } = await organization();
    const id = await queuePush(handle.db, org.id, 'refuse-1');
    const expectState = async (state: string) => {
      const res = await call(org.apiKey, id, 'retry', `k-${state}-${Math.random()}`);
      expect(res.status).toBe(409);
      const body = (await res.json()) as { error: { code: string; state: string; message: string } };
      expect(body.error).toMatchObject({ code: 'invalid_state', state });
      expect(body.error.message).toMatch(state === 'in_flight' ? /being sent/ : new RegExp(state));
    };
    await expectState('queued');
    await setPush(
      id,
      sql`status = 'failed', lease_owner = 'run-x', lease_expires_at = now() + interval '1 minute'`,
    );
    await expectState('in_flight');
    await setPush(
      id,
      sql`status = 'pushed', lease_owner = NULL, lease_expires_at = NULL, xero_invoice_id = 'x'`,
    );
    await expectState('pushed');
    await setPush(id, sql`status = 'cancelled'`);
    await expectState('cancelled');
  });

  it('bad input is a 4xx naming the field, never a 500', async () => {
    const { org } = await organization();
    const id = await queuePush(handle.db, org.id, 'bad-1');
    const noKey = await call(org.apiKey, id, 'retry');
    expect(noKey.status).toBe(400);
    expect(await noKey.json()).toMatchObject({
      error: { fields: [{ path: 'Idempotency-Key', message: 'required' }] },
    });
    expect((await call(org.apiKey, id, 'retry', 'x'.repeat(129))).status).toBe(400);
    expect((await call(org.apiKey, 'not-a-uuid', 'retry', 'k')).status).toBe(404);
    expect((await call(org.apiKey, 'not-a-uuid', 'cancel')).status).toBe(404);
    expect((await call(org.apiKey, crypto.randomUUID(), 'cancel')).status).toBe(404);
    // Another organization's push reads as absent.
    const { org: stranger } = await organization();
    expect((await call(stranger.apiKey, id, 'cancel')).status).toBe(404);
    const get = await app.request(`/api/invoices/${id}/cancel`, {
      headers: { authorization: `Bearer ${org.apiKey}` },
    });
    expect(get.status).toBe(405);
  });
});

describe('POST /api/invoices/{id}/cancel', () => {
  it('cancels a queued, failed or awaiting_connection push; the record stays, cancelled, and is never claimed', async () => {
    const { org, tenantId } = await organization();
    const ids = await Promise.all(['c-1', 'c-2', 'c-3'].map((k) => queuePush(handle.db, org.id, k)));
    await setPush(ids[1] as string, sql`status = 'failed', attempts = 1, xero_key_sent_at = now()`);
    await setPush(ids[2] as string, sql`status = 'awaiting_connection'`);
    for (const id of ids) {
      const res = await call(org.apiKey, id, 'cancel');
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ id, status: 'cancelled' });
    }
    // Cancelling again is answered as done.
    expect((await call(org.apiKey, ids[0] as string, 'cancel')).status).toBe(200);
    const { xero, calls } = recordingClient(sandbox);
    await pushDueInvoices(handle.db, deps(xero));
    expect(calls.filter((c) => ids.some((id) => c.includes(id)))).toEqual([]);
    expect(created(tenantId)).toBe(0);
    const list = await app.request('/api/invoices?status=cancelled', {
      headers: { authorization: `Bearer ${org.apiKey}` },
    });
    expect(((await list.json()) as { data: unknown[] }).data).toHaveLength(3);
  });

  it('refuses a push that may have reached Xero, naming why: in flight, in doubt, pushed, dead', async () => {
    const { org } = await organization();
    const id = await queuePush(handle.db, org.id, 'nc-1');
    const expectState = async (state: string) => {
      const res = await call(org.apiKey, id, 'cancel');
      expect(res.status).toBe(409);
      expect(await res.json()).toMatchObject({ error: { code: 'invalid_state', state }, invoice: { id } });
    };
    await setPush(id, sql`lease_owner = 'run-x', lease_expires_at = now() + interval '1 minute'`);
    await expectState('in_flight');
    await setPush(
      id,
      sql`status = 'failed', lease_owner = NULL, lease_expires_at = NULL, xero_in_doubt = true, xero_key_sent_at = now()`,
    );
    await expectState('in_doubt');
    // A release that recorded no sends attempted it under its first key.
    await setPush(id, sql`xero_in_doubt = false, xero_key_sent_at = NULL, attempts = 1`);
    await expectState('in_doubt');
    await setPush(id, sql`status = 'pushed'`);
    await expectState('pushed');
    await setPush(id, sql`status = 'dead'`);
    await expectState('dead');
  });

  it('a cancel that waits for a claim holding the row re-checks it, and refuses: in flight', async () => {
    const { org } = await organization();
    const id = await queuePush(handle.db, org.id, 'wait-1');
    const client = new pg.Client(url);
    await client.connect();
    try {
      // A claim's statement, stopped between its FOR UPDATE and its commit.
      await client.query('BEGIN');
      await client.query('SELECT id FROM invoice_pushes WHERE id = $1 FOR UPDATE', [id]);
      const cancel = cancelPush(handle.db, org.id, id);
      await new Promise((r) => setTimeout(r, 200));
      await client.query(
        `UPDATE invoice_pushes SET lease_owner = 'run-y', lease_expires_at = now() + interval '1 minute',
           xero_in_doubt = true, xero_key_sent_at = now() WHERE id = $1`,
        [id],
      );
      await client.query('COMMIT');
      expect(await cancel).toMatchObject({ kind: 'blocked', state: 'in_flight' });
    } finally {
      await client.end();
    }
  });

  it('a cancel racing a claim never lets a cancelled push reach Xero', async () => {
    const { org, tenantId } = await organization();
    const inner = recordingClient(sandbox).xero;
    // Each send takes a while, so the cancels land before, during and after it.
    const xero: XeroClient = {
      ...inner,
      putInvoice: (...args) => new Promise((r) => setTimeout(r, 10)).then(() => inner.putInvoice(...args)),
    };
    let cancelled = 0;
    let refused = 0;
    for (let round = 0; round < 30; round++) {
      const id = await queuePush(handle.db, org.id, `race-${round}`);
      const before = created(tenantId);
      const jitter = (ms: number) => new Promise((r) => setTimeout(r, Math.random() * ms));
      const [, outcome] = await Promise.all([
        jitter(4).then(() => pushDueInvoices(handle.db, deps(xero, { owner: `race-${round}` }))),
        jitter(30).then(() => cancelPush(handle.db, org.id, id)),
      ]);
      const row = await pushRow(url, id);
      if (outcome.kind === 'changed') {
        cancelled += 1;
        expect(row.status).toBe('cancelled');
        expect(created(tenantId)).toBe(before);
      } else {
        refused += 1;
        expect(outcome).toMatchObject({ kind: 'blocked' });
        expect(row.status).not.toBe('cancelled');
      }
      // Whatever the order, a push that reached Xero is not cancelled.
      if (created(tenantId) > before) expect(row.status).toBe('pushed');
    }
    expect(cancelled + refused).toBe(30);
    // Both orders happened.
    expect(cancelled).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
  });

  it('a claim after a cancel takes nothing, even with the cancelled row due and unleased', async () => {
    const { org } = await organization();
    const id = await queuePush(handle.db, org.id, 'after-1');
    expect(await cancelPush(handle.db, org.id, id)).toMatchObject({ kind: 'changed' });
    await setPush(id, sql`next_attempt_at = now() - interval '1 hour'`);
    const claim = await claimPushes(handle.db, {
      owner: 'x',
      leaseMs: 60_000,
      batchSize: 50,
      budget: XERO_BUDGET,
    });
    expect(claim.pushes.map((p) => p.id)).not.toContain(id);
  });
});
