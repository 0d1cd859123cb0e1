import type { Database } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import type { DatabaseHandle } from '@honest-health/platform/db';
import { DatabaseUnavailableError } from '@honest-health/platform/internal/db/poison-retry';
import { createTickRunner } from '@honest-health/platform/internal/jobs/tick';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { tokenContext } from '../src/app/connections/grants.js';
import { type RefreshTickDeps, refreshExpiringTokens } from '../src/app/connections/refresh-tokens.js';
import { KEY_RESEND_WITHIN_MS, type PushTickDeps, pushDueInvoices } from '../src/app/push/tick.js';
import { migratedDatabase } from './support/databases.js';
import type { Cluster } from './support/postgres.js';
import { sharedCluster } from './support/shared-postgres.js';
import {
  captureLog,
  connectedOrganization,
  openDatabase,
  pushRow,
  pushTickDeps,
  queuePush,
  refreshTickDeps,
  type Sandbox,
  testBox,
} from './support/ticks.js';

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

// A real 25006 from a real server: a write inside a read-only transaction.
const readOnlyWrite = (db: Database) =>
  db.transaction(async (tx) => {
    await tx.execute(sql`SET TRANSACTION READ ONLY`);
    await tx.execute(sql`INSERT INTO health_heartbeat (instance_id) VALUES ('tick-test')`);
  });

describe('runTick', () => {
  const captured: { err: unknown; context?: Record<string, string> }[] = [];
  const errors = {
    capture: (err: unknown, context?: Record<string, string>) => void captured.push({ err, context }),
    flush: async () => true,
  };

  const on = () => ({ database: handle });

  it('retries once on a fresh pool after a poison error', async () => {
    const runTick = createTickRunner(log, errors);
    const generation = handle.generation;
    let calls = 0;
    const result = await runTick(
      'retry-once',
      async (db) => {
        calls += 1;
        if (calls === 1) await readOnlyWrite(db);
        return 'done';
      },
      on(),
    );
    expect(result).toBe('done');
    expect(calls).toBe(2);
    expect(handle.generation).toBe(generation + 1);
  });

  it('gives every run a lease owner of its own under the instance; the retry after a poison error keeps it', async () => {
    const runTick = createTickRunner(log, errors, { instanceId: 'worker' });
    const owners: string[] = [];
    await runTick(
      'owned',
      async (db, run) => {
        owners.push(run.owner);
        if (owners.length === 1) await readOnlyWrite(db);
      },
      on(),
    );
    await runTick('owned', async (_db, run) => void owners.push(run.owner), on());
    expect(owners).toHaveLength(3);
    expect(owners[0]).toMatch(/^worker:[0-9a-f-]{36}$/);
    expect(owners[1]).toBe(owners[0]);
    expect(owners[2]).toMatch(/^worker:[0-9a-f-]{36}$/);
    expect(owners[2]).not.toBe(owners[0]);
  });

  it('logs `tick crashed` as a warning, unreported, when the retry meets the failover too', async () => {
    const runTick = createTickRunner(log, errors);
    const reported = captured.length;
    let calls = 0;
    const failing = runTick(
      'always-poisoned',
      async (db) => {
        calls += 1;
        await readOnlyWrite(db);
      },
      on(),
    );
    await expect(failing).rejects.toBeInstanceOf(DatabaseUnavailableError);
    expect(calls).toBe(2);
    // A routine failover: a warning naming the reason, not an error report.
    const crashed = lines.filter((l) => l.msg === 'tick crashed' && l.tick === 'always-poisoned');
    expect(crashed).toHaveLength(1);
    expect(crashed[0]).toMatchObject({ level: 'warn', database_unavailable: '25006' });
    expect(captured).toHaveLength(reported);
  });

  it('logs `tick crashed` as an error and reports any other failure', async () => {
    const runTick = createTickRunner(log, errors);
    const failing = runTick(
      'buggy',
      async () => {
        throw new Error('a bug');
      },
      on(),
    );
    await expect(failing).rejects.toThrow('a bug');
    expect(lines.find((l) => l.msg === 'tick crashed' && l.tick === 'buggy')).toMatchObject({
      level: 'error',
    });
    expect(captured.at(-1)?.context?.tick).toBe('buggy');
  });

  it('does not retry an error that is not poison', async () => {
    const runTick = createTickRunner(log, errors);
    const generation = handle.generation;
    let calls = 0;
    const failing = runTick(
      'unique-violation',
      async (db) => {
        calls += 1;
        await db.execute(
          sql`INSERT INTO health_heartbeat (instance_id) VALUES ('dup') ON CONFLICT DO NOTHING`,
        );
        await db.execute(sql`INSERT INTO health_heartbeat (instance_id) VALUES ('dup')`);
      },
      on(),
    );
    await expect(failing).rejects.toMatchObject({ cause: { code: '23505' } });
    expect(calls).toBe(1);
    expect(handle.generation).toBe(generation);
  });

  it('never runs the same tick twice at once', async () => {
    const runTick = createTickRunner(log, errors);
    let release!: () => void;
    const first = runTick('slow', () => new Promise<string>((r) => (release = () => r('first'))), on());
    expect(await runTick('slow', async () => 'second', on())).toBeUndefined();
    release();
    expect(await first).toBe('first');
  });
});

function pushDeps(overrides: Partial<PushTickDeps> = {}): PushTickDeps {
  return pushTickDeps(sandbox, box, log, overrides);
}

const makeDue = (id: string) =>
  handle.db.execute(sql`UPDATE invoice_pushes SET next_attempt_at = now() WHERE id = ${id}`);
const created = (tenantId: string) => sandbox.state.statsSnapshot().invoicesCreated[tenantId] ?? 0;

describe('push tick', () => {
  it('pushes a queued invoice and records the Xero id', async () => {
    const { org, tenantId } = await connectedOrganization(handle.db, box, sandbox, 'Push Co');
    const id = await queuePush(handle.db, org.id, 'k-happy');
    const result = await pushDueInvoices(handle.db, pushDeps());
    expect(result.pushed).toBeGreaterThanOrEqual(1);
    const row = await pushRow(url, id);
    expect(row).toMatchObject({ status: 'pushed', attempts: 1, lease_owner: null });
    expect(row.xero_invoice_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(created(tenantId)).toBe(1);
  });

  it('sends the same Idempotency-Key after a lost answer: Xero holds exactly one invoice', async () => {
    const { org, tenantId } = await connectedOrganization(handle.db, box, sandbox, 'Lost Answer Co');
    const id = await queuePush(handle.db, org.id, 'k-drop');
    // Xero creates the invoice, then the answer never reaches us (as if our side failed over).
    sandbox.state.faults.add({ target: 'invoices', kind: 'drop', count: 1 });
    await pushDueInvoices(handle.db, pushDeps());
    expect(await pushRow(url, id)).toMatchObject({ status: 'failed', attempts: 1 });
    expect(created(tenantId)).toBe(1);

    await makeDue(id);
    await pushDueInvoices(handle.db, pushDeps());
    const row = await pushRow(url, id);
    expect(row).toMatchObject({ status: 'pushed', attempts: 2 });
    expect(created(tenantId)).toBe(1);
    const stored = [...(sandbox.state.tenants.get(tenantId)?.invoices.keys() ?? [])];
    expect(stored).toEqual([row.xero_invoice_id]);
  });

  it('honours Retry-After on 429 without spending an attempt', async () => {
    const { org } = await connectedOrganization(handle.db, box, sandbox, 'Rate Limited Co');
    const id = await queuePush(handle.db, org.id, 'k-429');
    sandbox.state.faults.add({ target: 'invoices', kind: '429', count: 1, retryAfterSeconds: 7 });
    await pushDueInvoices(handle.db, pushDeps());
    const row = await pushRow(url, id);
    expect(row).toMatchObject({ status: 'queued', attempts: 0 });
    const wait = new Date(row.next_attempt_at).getTime() - Date.now();
    expect(wait).toBeGreaterThan(5000);
    expect(wait).toBeLessThan(9000);
  });

  it('marks a push dead at once when Xero rejects it (400), with Xero’s message', async () => {
    const { org } = await connectedOrganization(handle.db, box, sandbox, 'Invalid Co', {
      accountCodes: undefined,
    });
    const id = await queuePush(handle.db, org.id, 'k-400', {
      contact: { name: 'Customer' },
      lineItems: [{ description: 'Widget', quantity: '1', unitAmount: '10.00', accountCode: 'NOPE' }],
      date: '2026-11-29',
      currency: 'NZD',
    });
    await pushDueInvoices(handle.db, pushDeps());
    const row = await pushRow(url, id);
    expect(row.status).toBe('dead');
    expect(row.last_error).toMatch(/^Xero rejected the invoice: .*Account code/i);
  });

  it('backs off on 5xx and gives up after PUSH_MAX_ATTEMPTS', async () => {
    const { org, tenantId } = await connectedOrganization(handle.db, box, sandbox, 'Flaky Co');
    const id = await queuePush(handle.db, org.id, 'k-500');
    sandbox.state.faults.add({ target: 'invoices', kind: '500', count: 1 });
    await pushDueInvoices(handle.db, pushDeps({ maxAttempts: 2 }));
    const first = await pushRow(url, id);
    expect(first).toMatchObject({ status: 'failed', attempts: 1, xero_in_doubt: true });
    const wait = new Date(first.next_attempt_at).getTime() - Date.now();
    // Xero caches the 500 under the key: no resend before the key is old enough to be looked up.
    expect(wait).toBeGreaterThan(KEY_RESEND_WITHIN_MS - 15_000);
    expect(wait).toBeLessThanOrEqual(KEY_RESEND_WITHIN_MS);

    // Forced early, the resend under the same key gets Xero's cached 500 again.
    const replays = sandbox.state.statsSnapshot().idempotentReplays;
    await makeDue(id);
    await pushDueInvoices(handle.db, pushDeps({ maxAttempts: 2 }));
    const row = await pushRow(url, id);
    expect(row).toMatchObject({ status: 'dead', attempts: 2 });
    expect(row.last_error).toMatch(/gave up after 2 attempts: Xero answered 500; the invoice may exist/);
    expect(sandbox.state.statsSnapshot().idempotentReplays).toBe(replays + 1);
    expect(created(tenantId)).toBe(0);
  });

  it('leaves a push leased by a live run alone (its own owner too), and takes it over once the lease expires', async () => {
    const { org, tenantId } = await connectedOrganization(handle.db, box, sandbox, 'Lease Co');
    const id = await queuePush(handle.db, org.id, 'k-lease');
    // As the crashed replica left it: claimed, and its send recorded as in doubt (claim.ts).
    await handle.db.execute(
      sql`UPDATE invoice_pushes SET lease_owner = 'crashed-replica', lease_expires_at = now() + interval '1 minute', attempts = 1,
            xero_key_sent_at = now(), xero_in_doubt = true WHERE id = ${id}`,
    );
    await pushDueInvoices(handle.db, pushDeps());
    expect(await pushRow(url, id)).toMatchObject({ status: 'queued', lease_owner: 'crashed-replica' });
    // An owner is one run: the same name does not take back a lease it holds.
    await pushDueInvoices(handle.db, pushDeps({ owner: 'crashed-replica' }));
    expect(await pushRow(url, id)).toMatchObject({
      status: 'queued',
      attempts: 1,
      lease_owner: 'crashed-replica',
    });
    expect(created(tenantId)).toBe(0);

    await handle.db.execute(
      sql`UPDATE invoice_pushes SET lease_expires_at = now() - interval '1 second' WHERE id = ${id}`,
    );
    await pushDueInvoices(handle.db, pushDeps({ owner: 'replica-b' }));
    expect(await pushRow(url, id)).toMatchObject({ status: 'pushed', attempts: 2, lease_owner: null });
    expect(created(tenantId)).toBe(1);
  });

  it('on 401 expires the access token so the refresh tick renews it first', async () => {
    const { org, grantId } = await connectedOrganization(handle.db, box, sandbox, 'Revoked Token Co');
    const id = await queuePush(handle.db, org.id, 'k-401');
    const client = new pg.Client(url);
    await client.connect();
    const bogus = await box.seal('not-a-token', tokenContext({ id: grantId, sealContext: null }, 'access'));
    await client.query(
      'UPDATE xero_grants SET access_token_enc = $1, token_version = token_version + 1 WHERE id = $2',
      [bogus, grantId],
    );
    await pushDueInvoices(handle.db, pushDeps());
    const conn = await client.query(
      'SELECT access_expires_at <= now() AS expired FROM xero_grants WHERE id = $1',
      [grantId],
    );
    await client.end();
    expect(conn.rows[0].expired).toBe(true);
    expect(await pushRow(url, id)).toMatchObject({
      status: 'queued',
      attempts: 0,
      last_error: 'Xero answered 401',
    });
  });

  it('keeps a push in doubt when its call threw: it may have reached Xero', async () => {
    const { org } = await connectedOrganization(handle.db, box, sandbox, 'Throwing Client Co');
    const id = await queuePush(handle.db, org.id, 'k-throw');
    const deps = pushDeps();
    // A bug in the client after the request went out.
    const xero = {
      ...deps.xero,
      putInvoice: async () => {
        throw new TypeError('a bug after the request went out');
      },
    };
    await pushDueInvoices(handle.db, { ...deps, xero });
    const row = await pushRow(url, id);
    expect(row).toMatchObject({ status: 'failed', last_error: 'internal error', xero_in_doubt: true });
    expect(row.xero_key_sent_at).not.toBeNull();
  });

  it('gives a push it does not send back as the claim found it: its key unsent, its doubt as it was', async () => {
    const { org, grantId } = await connectedOrganization(handle.db, box, sandbox, 'Unopened Token Co');
    const fresh = await queuePush(handle.db, org.id, 'k-unopened-1');
    const doubted = await queuePush(handle.db, org.id, 'k-unopened-2');
    // An earlier attempt under this key may have created the invoice, a minute ago.
    await handle.db.execute(
      sql`UPDATE invoice_pushes SET xero_in_doubt = true, xero_key_sent_at = now() - interval '1 minute', attempts = 1
          WHERE id = ${doubted}`,
    );
    const before = await pushRow(url, doubted);
    // Sealed for another grant: it does not open, so the tick sends neither push.
    const foreign = await box.seal(
      'a-token',
      tokenContext({ id: crypto.randomUUID(), sealContext: null }, 'access'),
    );
    await handle.db.execute(
      sql`UPDATE xero_grants SET access_token_enc = ${foreign}, token_version = token_version + 1 WHERE id = ${grantId}`,
    );
    const calls = sandbox.state.statsSnapshot().invoiceCalls;
    const result = await pushDueInvoices(handle.db, pushDeps());
    expect(result).toMatchObject({ claimed: 2, deferred: 2, pushed: 0 });
    expect(sandbox.state.statsSnapshot().invoiceCalls).toBe(calls);
    expect(await pushRow(url, fresh)).toMatchObject({
      status: 'queued',
      attempts: 0,
      xero_in_doubt: false,
      xero_key_sent_at: null,
      lease_owner: null,
    });
    expect(await pushRow(url, doubted)).toMatchObject({
      status: 'queued',
      attempts: 1,
      xero_in_doubt: true,
      xero_key_sent_at: before.xero_key_sent_at,
    });
  });
});

function refreshDeps(overrides: Partial<RefreshTickDeps> = {}): RefreshTickDeps {
  return refreshTickDeps(sandbox, box, log, overrides);
}

/** A connection's row with its grant's token columns (the grant's `status` as `grant_status`). */
async function connection(id: string) {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return (
      await client.query(
        `SELECT g.*, g.status AS grant_status, c.status, c.tenant_id, c.grant_id
         FROM xero_connections c JOIN xero_grants g ON g.id = c.grant_id WHERE c.id = $1`,
        [id],
      )
    ).rows[0];
  } finally {
    await client.end();
  }
}

const expireSoon = (connectionId: string) =>
  handle.db.execute(
    sql`UPDATE xero_grants SET access_expires_at = now() + interval '5 minutes', refresh_token_issued_at = now() - interval '8 days'
        WHERE id = (SELECT grant_id FROM xero_connections WHERE id = ${connectionId})`,
  );

describe('token refresh tick', () => {
  it('leaves a grant leased by a live run alone, its own owner too, until the lease expires', async () => {
    const { connectionId, grantId } = await connectedOrganization(handle.db, box, sandbox, 'Leased Grant Co');
    await expireSoon(connectionId);
    await handle.db.execute(
      sql`UPDATE xero_grants SET refresh_lease_owner = 'run-a', refresh_lease_expires_at = now() + interval '1 minute'
          WHERE id = ${grantId}`,
    );
    await refreshExpiringTokens(handle.db, refreshDeps({ owner: 'run-a' }));
    await refreshExpiringTokens(handle.db, refreshDeps({ owner: 'run-b' }));
    expect(await connection(connectionId)).toMatchObject({ token_version: 1, refresh_lease_owner: 'run-a' });
    await handle.db.execute(
      sql`UPDATE xero_grants SET refresh_lease_expires_at = now() - interval '1 second' WHERE id = ${grantId}`,
    );
    await refreshExpiringTokens(handle.db, refreshDeps({ owner: 'run-b' }));
    expect(await connection(connectionId)).toMatchObject({ token_version: 2, refresh_lease_owner: null });
  });

  it('refreshes a token about to expire, and the new tokens work', async () => {
    const { org, connectionId, tenantId } = await connectedOrganization(
      handle.db,
      box,
      sandbox,
      'Refresh Co',
    );
    await expireSoon(connectionId);
    const grantsBefore = sandbox.state.statsSnapshot().refreshGrants;
    const result = await refreshExpiringTokens(handle.db, refreshDeps());
    expect(result.refreshed).toBeGreaterThanOrEqual(1);
    expect(sandbox.state.statsSnapshot().refreshGrants).toBeGreaterThan(grantsBefore);
    const row = await connection(connectionId);
    expect(row).toMatchObject({ status: 'active', token_version: 2, refresh_lease_owner: null });
    expect(new Date(row.access_expires_at).getTime()).toBeGreaterThan(Date.now() + 20 * 60_000);
    // Nothing is stored in the clear.
    expect(JSON.stringify(row)).not.toMatch(/eyJ/);

    await queuePush(handle.db, org.id, 'k-after-refresh');
    await pushDueInvoices(handle.db, pushDeps());
    expect(created(tenantId)).toBe(1);
  });

  it('survives a lost token answer: the retry reuses the old refresh token inside Xero’s grace window', async () => {
    const { org, connectionId, tenantId } = await connectedOrganization(handle.db, box, sandbox, 'Grace Co');
    await expireSoon(connectionId);
    // Xero rotates the token, then its answer is lost (a failover between Xero's answer and our save).
    sandbox.state.faults.add({ target: 'token', kind: 'drop', count: 1 });
    const first = await refreshExpiringTokens(handle.db, refreshDeps());
    expect(first.failed).toBeGreaterThanOrEqual(1);
    expect((await connection(connectionId)).token_version).toBe(1);

    const reusedBefore = sandbox.state.statsSnapshot().refreshReusedInGrace;
    const second = await refreshExpiringTokens(handle.db, refreshDeps());
    expect(second.refreshed).toBeGreaterThanOrEqual(1);
    expect(sandbox.state.statsSnapshot().refreshReusedInGrace).toBe(reusedBefore + 1);
    expect(await connection(connectionId)).toMatchObject({ status: 'active', token_version: 2 });

    await queuePush(handle.db, org.id, 'k-after-grace');
    await pushDueInvoices(handle.db, pushDeps());
    expect(created(tenantId)).toBe(1);
  });

  it('marks a revoked connection needs_reauth', async () => {
    const { connectionId } = await connectedOrganization(handle.db, box, sandbox, 'Revoked Co');
    await expireSoon(connectionId);
    for (const grant of sandbox.state.identity.grants()) {
      if ([...grant.connections.keys()].length && grant.revokedAt === null) {
        const row = await connection(connectionId);
        if ([...grant.connections.keys()].includes(row.tenant_id))
          sandbox.state.identity.revokeGrant(grant.authEventId, sandbox.state.now());
      }
    }
    await refreshExpiringTokens(handle.db, refreshDeps());
    expect((await connection(connectionId)).status).toBe('needs_reauth');
  });

  it('refreshes a connection once when two replicas tick together', async () => {
    const { connectionId } = await connectedOrganization(handle.db, box, sandbox, 'Two Replicas Co');
    await expireSoon(connectionId);
    const grantsBefore = sandbox.state.statsSnapshot().refreshGrants;
    const [a, b] = await Promise.all([
      refreshExpiringTokens(handle.db, refreshDeps({ owner: 'replica-a' })),
      refreshExpiringTokens(handle.db, refreshDeps({ owner: 'replica-b' })),
    ]);
    expect(a.refreshed + b.refreshed).toBe(1);
    expect(sandbox.state.statsSnapshot().refreshGrants).toBe(grantsBefore + 1);
    expect((await connection(connectionId)).token_version).toBe(2);
  });
});
