// Exactly once across Xero's six minutes: Xero keeps an Idempotency-Key "for 6 minutes from the time of
// the first call, after which they expire", and caches an internal error under it ("Idempotent
// requests", developer.xero.com). A push in doubt is looked up by its marker (the invoice's Url) once
// its key is that old, instead of being sent again. Real Postgres, the Xero sandbox for Xero.

import { loadConfig } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import { DatabaseHandle, migrate } from '@honest-health/platform/db';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { AccessTokenCache } from '../src/app/connections/grants.js';
import { openDriver } from '../src/app/databases.js';
import { migrations } from '../src/app/migrations.gen.js';
import { KEY_RESEND_WITHIN_MS, type PushTickDeps, pushDueInvoices } from '../src/app/push/tick.js';
import { createXeroClient, type XeroClient } from '../src/app/xero/client.js';
import { freshDatabase, migratedDatabase } from './support/databases.js';
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
  xeroConfigFor,
} from './support/ticks.js';

let cluster: Cluster;
let sandbox: Sandbox;
let box: SecretBox;
let url: string;
let handle: DatabaseHandle;
const { log } = captureLog();

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

function deps(xero: XeroClient): PushTickDeps {
  return pushTickDeps(sandbox, box, log, { xero, tokens: new AccessTokenCache() });
}

/** `ms` pass for both sides: the sandbox's clock, and this push's times in our database. */
async function elapse(id: string, ms: number) {
  sandbox.state.clock.advance(ms);
  await handle.db.execute(sql`
    UPDATE invoice_pushes SET
      xero_key_sent_at = xero_key_sent_at - ${ms} * interval '1 millisecond',
      next_attempt_at = next_attempt_at - ${ms} * interval '1 millisecond'
    WHERE id = ${id}`);
}

const invoicesOf = (tenantId: string) => [...(sandbox.state.tenants.get(tenantId)?.invoices.values() ?? [])];
const SIX_MINUTES = 6 * 60_000;

describe('exactly once across Xero’s six minutes', () => {
  it('Lost answer, late retry: the invoice Xero made is found by its marker, not made again', async () => {
    const { org, tenantId } = await connectedOrganization(handle.db, box, sandbox, 'Late Retry Co');
    const id = await queuePush(handle.db, org.id, 'late-1', {
      contact: { name: 'Customer' },
      lineItems: [{ description: 'Widget', quantity: '1', unitAmount: '10.00' }],
      date: '2026-11-29',
      currency: 'NZD',
      reference: 'PO-77',
    });
    const { xero, calls } = recordingClient(sandbox);
    // Xero creates the invoice, and its answer is lost.
    sandbox.state.faults.add({ target: 'invoices', kind: 'drop', count: 1 });
    expect(await pushDueInvoices(handle.db, deps(xero))).toMatchObject({ retrying: 1 });
    const first = await pushRow(url, id);
    expect(first).toMatchObject({ status: 'failed', xero_in_doubt: true, xero_key_generation: 0 });
    expect(first.xero_key_sent_at).not.toBeNull();
    expect(invoicesOf(tenantId)).toHaveLength(1);

    // The retry comes 7 minutes later, when Xero no longer knows the key.
    await elapse(id, SIX_MINUTES + 60_000);
    await handle.db.execute(sql`UPDATE invoice_pushes SET next_attempt_at = now() WHERE id = ${id}`);
    expect(await pushDueInvoices(handle.db, deps(xero))).toMatchObject({ pushed: 1 });

    const invoices = invoicesOf(tenantId);
    expect(invoices).toHaveLength(1);
    const row = await pushRow(url, id);
    expect(row).toMatchObject({
      status: 'pushed',
      xero_invoice_id: invoices[0]?.InvoiceID,
      xero_in_doubt: false,
    });
    // The marker is the invoice's Url; the organization's reference keeps its own field.
    expect(invoices[0]).toMatchObject({ Url: row.xero_marker, Reference: 'PO-77' });
    expect(row.xero_marker).toBe(`http://127.0.0.1:1/api/invoices/${id}`);
    expect(calls).toEqual([`PUT ${id}`, `GET ${row.xero_marker}`]);
  });

  it('A retry inside the window keeps the key', async () => {
    const { org, tenantId } = await connectedOrganization(handle.db, box, sandbox, 'Early Retry Co');
    const id = await queuePush(handle.db, org.id, 'early-1');
    const { xero, calls } = recordingClient(sandbox);
    sandbox.state.faults.add({ target: 'invoices', kind: 'drop', count: 1 });
    await pushDueInvoices(handle.db, deps(xero));
    await elapse(id, KEY_RESEND_WITHIN_MS - 30_000);
    await handle.db.execute(sql`UPDATE invoice_pushes SET next_attempt_at = now() WHERE id = ${id}`);
    expect(await pushDueInvoices(handle.db, deps(xero))).toMatchObject({ pushed: 1 });
    expect(calls).toEqual([`PUT ${id}`, `PUT ${id}`]);
    expect(invoicesOf(tenantId)).toHaveLength(1);
  });

  it('A cached error: a 500 under a key is not resent into replays; a lookup, then one invoice under a new key', async () => {
    const { org, tenantId } = await connectedOrganization(handle.db, box, sandbox, 'Cached Error Co');
    const id = await queuePush(handle.db, org.id, 'cached-1');
    const { xero, calls } = recordingClient(sandbox);
    const replays = sandbox.state.statsSnapshot().idempotentReplays;
    sandbox.state.faults.add({ target: 'invoices', kind: '500', count: 1 });
    await pushDueInvoices(handle.db, deps(xero));
    const first = await pushRow(url, id);
    expect(first).toMatchObject({
      status: 'failed',
      attempts: 1,
      xero_in_doubt: true,
      last_error: 'Xero answered 500',
    });

    // Ticks inside the window claim nothing: a resend would only replay the cached 500.
    for (let t = 0; t < 3; t++) {
      await elapse(id, 60_000);
      expect(await pushDueInvoices(handle.db, deps(xero))).toMatchObject({ claimed: 0 });
    }
    await elapse(id, KEY_RESEND_WITHIN_MS - 3 * 60_000);
    // Due now: looked up (nothing), then sent under the next key on the next claim.
    expect(await pushDueInvoices(handle.db, deps(xero))).toMatchObject({ claimed: 1, retrying: 1 });
    expect(await pushRow(url, id)).toMatchObject({
      status: 'failed',
      attempts: 1,
      xero_key_generation: 1,
      xero_key_sent_at: null,
      xero_in_doubt: false,
    });
    expect(await pushDueInvoices(handle.db, deps(xero))).toMatchObject({ pushed: 1 });

    const invoices = invoicesOf(tenantId);
    expect(invoices).toHaveLength(1);
    expect(await pushRow(url, id)).toMatchObject({
      status: 'pushed',
      attempts: 2,
      xero_invoice_id: invoices[0]?.InvoiceID,
    });
    expect(calls).toEqual([`PUT ${id}`, `GET http://127.0.0.1:1/api/invoices/${id}`, `PUT ${id}:1`]);
    expect(sandbox.state.statsSnapshot().idempotentReplays).toBe(replays);
  });

  it('A tick that dies after Xero answered: the send was recorded first, so the retry keeps its key', async () => {
    const { org, tenantId } = await connectedOrganization(handle.db, box, sandbox, 'Crashed Tick Co');
    const id = await queuePush(handle.db, org.id, 'crash-1');
    const inner = createXeroClient(xeroConfigFor(sandbox));
    // Xero creates the invoice; then our database goes away before the settle (SQLSTATE 57P01).
    const dying: XeroClient = {
      ...inner,
      async putInvoice(token, tenant, key, invoice) {
        await inner.putInvoice(token, tenant, key, invoice);
        throw Object.assign(new Error('terminating connection due to administrator command'), {
          code: '57P01',
        });
      },
    };
    await expect(pushDueInvoices(handle.db, deps(dying))).rejects.toMatchObject({ code: '57P01' });
    expect(await pushRow(url, id)).toMatchObject({ lease_owner: 'replica-a', xero_in_doubt: true });
    expect(invoicesOf(tenantId)).toHaveLength(1);

    // Another replica takes the push once the lease expires, inside the key's window: Xero replays.
    await elapse(id, 2 * 60_000);
    await handle.db.execute(
      sql`UPDATE invoice_pushes SET lease_expires_at = now() - interval '1 second', next_attempt_at = now() WHERE id = ${id}`,
    );
    const replays = sandbox.state.statsSnapshot().idempotentReplays;
    const { xero, calls } = recordingClient(sandbox);
    expect(await pushDueInvoices(handle.db, { ...deps(xero), owner: 'replica-b' })).toMatchObject({
      pushed: 1,
    });
    expect(calls).toEqual([`PUT ${id}`]);
    expect(sandbox.state.statsSnapshot().idempotentReplays).toBe(replays + 1);
    expect(invoicesOf(tenantId)).toHaveLength(1);
  });

  it('Migration 0009 marks the pushes the previous release attempted as in doubt since they were created', async () => {
    const own = await freshDatabase(cluster);
    const driver = openDriver(loadConfig({ DATABASE_URL: own }), log);
    await driver.ready();
    const old = new DatabaseHandle(driver, 'app', log);
    try {
      // Later migrations (0010's one holder per tenant) are what today's helpers write through, so the
      // rows are made on the whole schema as the previous release leaves them (none of 0009's columns
      // set: their defaults), and 0009's backfill statement then runs on them as the migration does.
      await migrate(old.pool, migrations, log);
      const backfill = migrations.find((m) => m.tag === '0009_push_key_window')?.statements.at(-1);
      expect(backfill).toMatch(/^-- hand-written:[\s\S]*UPDATE "invoice_pushes"/);
      const { org, tenantId } = await connectedOrganization(old.db, box, sandbox, 'Before 0009 Co');
      const [stale, recent, fresh] = [
        await queuePush(old.db, org.id, 'before-stale'),
        await queuePush(old.db, org.id, 'before-recent'),
        await queuePush(old.db, org.id, 'before-fresh'),
      ];
      await old.db.execute(sql`
        UPDATE invoice_pushes SET status = 'failed', attempts = 1, last_error = 'timeout',
          created_at = now() - CASE WHEN id = ${stale} THEN interval '10 minutes' ELSE interval '1 minute' END
        WHERE id IN (${stale}, ${recent})`);
      await old.db.execute(sql.raw(backfill ?? ''));
      const row = (id: string) => pushRow(own, id);
      expect(await row(stale)).toMatchObject({ xero_in_doubt: true, xero_key_generation: 0 });
      expect((await row(recent)).xero_key_sent_at).not.toBeNull();
      expect(await row(fresh)).toMatchObject({ xero_in_doubt: false, xero_key_sent_at: null });

      await old.db.execute(sql`UPDATE invoice_pushes SET next_attempt_at = now()`);
      const { xero, calls } = recordingClient(sandbox);
      await pushDueInvoices(old.db, deps(xero));
      // The stale one is looked up (absent here); the recent one keeps its key inside the window.
      expect(calls.sort()).toEqual(
        [`GET http://127.0.0.1:1/api/invoices/${stale}`, `PUT ${recent}`, `PUT ${fresh}`].sort(),
      );
      expect(await row(stale)).toMatchObject({ status: 'failed', xero_key_generation: 1 });
      expect(invoicesOf(tenantId)).toHaveLength(2);
    } finally {
      await old.close();
    }
  });

  it('A push a previous release attempted (no send recorded) is looked up before it is sent again', async () => {
    const { org, tenantId } = await connectedOrganization(handle.db, box, sandbox, 'Old Release Co');
    const id = await queuePush(handle.db, org.id, 'legacy-1');
    // As the previous release leaves a push after a timeout: failed, one attempt, none of the new columns.
    await handle.db.execute(
      sql`UPDATE invoice_pushes SET status = 'failed', attempts = 1, last_error = 'timeout' WHERE id = ${id}`,
    );
    const { xero, calls } = recordingClient(sandbox);
    expect(await pushDueInvoices(handle.db, deps(xero))).toMatchObject({ retrying: 1 });
    expect(await pushDueInvoices(handle.db, deps(xero))).toMatchObject({ pushed: 1 });
    expect(calls).toEqual([`GET http://127.0.0.1:1/api/invoices/${id}`, `PUT ${id}:1`]);
    expect(invoicesOf(tenantId)).toHaveLength(1);
  });
});
