// Stored Xero tokens against the sandbox and a real Postgres: one grant that does not open (or whose
// refresh fails) fails alone, TOKEN_ENCRYPTION_KEY rotates through `tokens:reseal` with every push and
// refresh working before, during and after, and two replicas with a slow token endpoint redeem each
// refresh token once.

import type { Database } from '@honest-health/platform';
import { createSecretBox, generateKeyBase64, type SecretBox } from '@honest-health/platform/crypto';
import type { DatabaseHandle } from '@honest-health/platform/db';
import { sql } from 'drizzle-orm';
import { Hono } from 'hono';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import type { Organization } from '../src/app/api-key-registry.js';
import type { AuthEnv } from '../src/app/auth.js';
import { tokenContext } from '../src/app/connections/grants.js';
import { type RefreshTickDeps, refreshExpiringTokens } from '../src/app/connections/refresh-tokens.js';
import { resealGrantTokens, resealRows } from '../src/app/connections/reseal.js';
import { connectionRoutes } from '../src/app/connections/routes.js';
import { pushDueInvoices } from '../src/app/push/tick.js';
import { createXeroClient } from '../src/app/xero/client.js';
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
  xeroConfigFor,
} from './support/ticks.js';
import { until } from './support/until.js';

let cluster: Cluster;
let sandbox: Sandbox;
const handles: DatabaseHandle[] = [];
const { log, lines } = captureLog();

beforeAll(async () => {
  [cluster, sandbox] = await Promise.all([sharedCluster(), startXeroSandbox({ port: 0 })]);
});
afterAll(async () => {
  for (const h of handles) await h.close();
  await sandbox?.close();
  await cluster?.remove();
});
afterEach(() => {
  sandbox.state.faults.clear();
});

/** Each test on its own database: no other test's grants are due in it. */
async function fresh() {
  const url = await migratedDatabase(cluster, 'tokens');
  const handle = await openDatabase(url, log);
  handles.push(handle);
  return { db: handle.db, url, handle };
}

const stats = () => sandbox.state.statsSnapshot();
const created = (tenantId: string) => stats().invoicesCreated[tenantId] ?? 0;

function refreshDeps(box: SecretBox, overrides: Partial<RefreshTickDeps> = {}): RefreshTickDeps {
  return refreshTickDeps(sandbox, box, log, overrides);
}

const pushDeps = (box: SecretBox) => pushTickDeps(sandbox, box, log);

async function rows<T>(db: Database, query: ReturnType<typeof sql>): Promise<T[]> {
  return ((await db.execute(query)) as unknown as { rows: T[] }).rows;
}

async function grantRow(db: Database, id: string) {
  const [row] = await rows<{
    status: string;
    refresh_error: string | null;
    refresh_failures: number;
    backed_off_s: number | null;
    token_version: number;
    access_token_enc: string;
    refresh_token_enc: string;
  }>(
    db,
    sql`SELECT status, refresh_error, refresh_failures, token_version, access_token_enc, refresh_token_enc,
               extract(epoch FROM refresh_retry_at - now())::float AS backed_off_s
        FROM xero_grants WHERE id = ${id}`,
  );
  if (!row) throw new Error(`no grant ${id}`);
  return row;
}

/**
 * Every grant of the database is due for a refresh: its access token expires in 5 minutes and its
 * refresh token is past the keep-alive cadence (an idle grant is refreshed only then, or for a push).
 */
const allDue = (db: Database) =>
  db.execute(
    sql`UPDATE xero_grants SET access_expires_at = now() + interval '5 minutes', refresh_token_issued_at = now() - interval '8 days'`,
  );

/** GET /api/connections as the organization sees it. */
async function connectionsOf(handle: DatabaseHandle, box: SecretBox, org: { id: string; name: string }) {
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
  const res = await app.request('/');
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: { status: string; statusReason: string | null }[] }).data;
}

/** Re-seals a grant's stored tokens under another box (as a server holding that key would have). */
async function sealUnder(db: Database, from: SecretBox, to: SecretBox, grantId: string) {
  const row = await grantRow(db, grantId);
  const ctx = { id: grantId, sealContext: null };
  const access = await from.open(row.access_token_enc, tokenContext(ctx, 'access'));
  const refresh = await from.open(row.refresh_token_enc, tokenContext(ctx, 'refresh'));
  await db.execute(sql`
    UPDATE xero_grants SET access_token_enc = ${await to.seal(access, tokenContext(ctx, 'access'))},
      refresh_token_enc = ${await to.seal(refresh, tokenContext(ctx, 'refresh'))} WHERE id = ${grantId}`);
  return { access, refresh };
}

describe('grants fail one at a time', () => {
  it('one grant whose tokens do not open among six: the other five are refreshed; it says why, backs off and heals with its key', async () => {
    const { db, handle, url } = await fresh();
    const box = await createSecretBox(generateKeyBase64());
    const six = [];
    for (let i = 1; i <= 6; i++) six.push(await connectedOrganization(db, box, sandbox, `Six ${i}`));
    const broken = six[0] as (typeof six)[number];
    // Sealed under a key this server was not given (a rotation whose previous key was left out).
    const lostKey = generateKeyBase64();
    const lost = await createSecretBox(lostKey);
    const plain = await sealUnder(db, box, lost, broken.grantId);
    await allDue(db);
    // First in the batch's order, where a failure that ended the batch would stop every grant after it.
    await db.execute(
      sql`UPDATE xero_grants SET access_expires_at = now() + interval '2 minutes' WHERE id = ${broken.grantId}`,
    );

    const before = stats().refreshGrants;
    const result = await refreshExpiringTokens(db, refreshDeps(box));
    expect(result).toMatchObject({ claimed: 6, refreshed: 5, undecryptable: 1, failed: 0 });
    expect(stats().refreshGrants).toBe(before + 5);
    for (const other of six.slice(1)) expect((await grantRow(db, other.grantId)).token_version).toBe(2);

    const row = await grantRow(db, broken.grantId);
    expect(row).toMatchObject({ status: 'active', refresh_failures: 1, token_version: 1 });
    expect(row.refresh_error).toBe(
      `the stored refresh token sealed under key ${lost.keyId}, which is not configured`,
    );
    expect(row.backed_off_s).toBeGreaterThan(50);
    expect(
      lines.some((l) => l.msg === 'xero token refresh skipped: the stored refresh token does not open'),
    ).toBe(true);
    const logged = JSON.stringify(lines);
    expect(logged).not.toContain(plain.refresh);
    expect(logged).not.toContain(lostKey);

    // Backed off: the next runs do not spend a place of the batch on it.
    expect(await refreshExpiringTokens(db, refreshDeps(box))).toMatchObject({ claimed: 0 });
    // Where operators look: the connection stays active and says why.
    expect(await connectionsOf(handle, box, broken.org)).toMatchObject([
      { status: 'active', statusReason: row.refresh_error },
    ]);
    // Its invoices wait with their attempts intact (the invoice is not at fault), and never die of it.
    const waiting = await queuePush(db, broken.org.id, 'six-waits');
    expect(await pushDueInvoices(db, pushDeps(box))).toMatchObject({ claimed: 1, deferred: 1, dead: 0 });
    expect(await pushRow(url, waiting)).toMatchObject({
      status: 'queued',
      attempts: 0,
    });
    // and its access token is expired, so the refresh tick takes the grant at once when it can.
    const [expired] = await rows<{ expired: boolean }>(
      db,
      sql`SELECT access_expires_at <= now() AS expired FROM xero_grants WHERE id = ${broken.grantId}`,
    );
    expect(expired?.expired).toBe(true);

    // The operator puts the key back (TOKEN_ENCRYPTION_KEYS_PREVIOUS): the next try heals it.
    const healed = await createSecretBox(generateKeyBase64(), [lostKey]);
    await db.execute(sql`UPDATE xero_grants SET refresh_retry_at = now() WHERE id = ${broken.grantId}`);
    expect(await refreshExpiringTokens(db, refreshDeps(healed))).toMatchObject({ refreshed: 1 });
    expect(await grantRow(db, broken.grantId)).toMatchObject({
      refresh_error: null,
      refresh_failures: 0,
      backed_off_s: null,
      token_version: 2,
    });
    expect(await connectionsOf(handle, healed, broken.org)).toMatchObject([
      { status: 'active', statusReason: null },
    ]);
    await db.execute(sql`UPDATE invoice_pushes SET next_attempt_at = now() WHERE id = ${waiting}`);
    expect(await pushDueInvoices(db, pushDeps(healed))).toMatchObject({ pushed: 1 });
    expect(created(broken.tenantId)).toBe(1);
  });

  it('a refresh that throws or fails at Xero costs its grant a back-off, not the batch', async () => {
    const { db } = await fresh();
    const box = await createSecretBox(generateKeyBase64());
    const a = await connectedOrganization(db, box, sandbox, 'Throws A');
    const b = await connectedOrganization(db, box, sandbox, 'Throws B');
    await allDue(db);
    const real = createXeroClient(xeroConfigFor(sandbox));
    let calls = 0;
    const xero = {
      ...real,
      refresh: (token: string) => {
        calls += 1;
        if (calls === 1) throw new TypeError('unexpected');
        return real.refresh(token);
      },
    };
    const result = await refreshExpiringTokens(db, refreshDeps(box, { xero }));
    expect(result).toMatchObject({ claimed: 2, refreshed: 1, failed: 1 });
    const versions = [await grantRow(db, a.grantId), await grantRow(db, b.grantId)];
    const failedRow = versions.find((r) => r.token_version === 1);
    expect(failedRow?.refresh_error).toBe('token refresh failed unexpectedly (TypeError: unexpected)');

    // Xero unreachable: recorded, the failures count up, the grant is retried after its back-off.
    await db.execute(sql`UPDATE xero_grants SET refresh_retry_at = now()`);
    sandbox.state.faults.add({ target: 'token', kind: '503', count: 1 });
    expect(await refreshExpiringTokens(db, refreshDeps(box))).toMatchObject({ claimed: 1, failed: 1 });
    const again = await grantRow(db, versions[0]?.token_version === 1 ? a.grantId : b.grantId);
    expect(again).toMatchObject({
      refresh_failures: 2,
      refresh_error: 'Xero token refresh failed: token endpoint answered 503',
    });
    // The second failure in a row, this one at Xero: a minute (the first would be the next tick).
    expect(again.backed_off_s).toBeGreaterThan(50);
    expect(again.backed_off_s).toBeLessThan(70);

    // A corrupt row (no key id, no key opens it): recorded as such, the batch goes on.
    const other = versions[0]?.token_version === 1 ? b.grantId : a.grantId;
    await db.execute(sql`UPDATE xero_grants SET refresh_retry_at = NULL`);
    await allDue(db);
    await db.execute(sql`UPDATE xero_grants SET refresh_token_enc = 'corrupt' WHERE id = ${other}`);
    expect(await refreshExpiringTokens(db, refreshDeps(box))).toMatchObject({
      claimed: 2,
      refreshed: 1,
      undecryptable: 1,
    });
    expect((await grantRow(db, other)).refresh_error).toBe(
      'the stored refresh token sealed without a key id, and no configured key opens it',
    );
  });
});

describe('rotating TOKEN_ENCRYPTION_KEY', () => {
  it('before, during and after tokens:reseal every push and refresh works; after it, the old key can go', async () => {
    const { db } = await fresh();
    const OLD = generateKeyBase64();
    const NEW = generateKeyBase64();
    const oldBox = await createSecretBox(OLD);
    const orgs: Awaited<ReturnType<typeof connectedOrganization>>[] = [];
    for (let i = 1; i <= 4; i++) orgs.push(await connectedOrganization(db, oldBox, sandbox, `Rotate ${i}`));
    const ids = orgs.map((o) => o.grantId).sort();
    let round = 0;
    /** Every organization pushes one invoice, and every grant (or those given) refreshes once. */
    const everythingWorks = async (box: SecretBox, refresh: readonly string[] = ids) => {
      round += 1;
      const before = stats();
      await db.execute(
        sql`UPDATE xero_grants SET access_expires_at = now() + interval '5 minutes', refresh_token_issued_at = now() - interval '8 days' WHERE id = ANY(${sql.param(refresh)}::uuid[])`,
      );
      expect(await refreshExpiringTokens(db, refreshDeps(box))).toMatchObject({ refreshed: refresh.length });
      for (const o of orgs) await queuePush(db, o.org.id, `rotate-${round}`);
      expect(await pushDueInvoices(db, pushDeps(box))).toMatchObject({ pushed: orgs.length });
      expect(stats().refreshGrants).toBe(before.refreshGrants + refresh.length);
      expect(stats().refreshReusedInGrace).toBe(before.refreshReusedInGrace);
    };
    /** Makes a grant's ciphertexts look like those stored before key ids (the bare base64 part). */
    const legacy = (grantId: string) =>
      db.execute(sql`
        UPDATE xero_grants SET access_token_enc = split_part(access_token_enc, '.', 3),
          refresh_token_enc = split_part(refresh_token_enc, '.', 3) WHERE id = ${grantId}`);

    // Before: one key.
    await everythingWorks(oldBox);
    await legacy(ids[0] as string);
    await everythingWorks(oldBox, []); // pushes only: a legacy access token opens too

    // Every server now seals under the new key and still opens the old one.
    const bothBox = await createSecretBox(NEW, [OLD]);
    await everythingWorks(bothBox, []);
    // During: one grant per batch, pushes and a refresh between the batches.
    const last = ids[ids.length - 1] as string;
    let batches = 0;
    const counts = await resealGrantTokens(db, bothBox, {
      batchSize: 1,
      afterBatch: async () => {
        batches += 1;
        if (batches === 1) await everythingWorks(bothBox, [last]);
        else await everythingWorks(bothBox, []);
      },
    });
    // The grant refreshed mid-way was already under the new key when the reseal reached it.
    expect(counts).toMatchObject({ resealed: 3, current: 1, unreadable: 0, busy: 0 });
    expect(batches).toBe(4);

    // After: every ciphertext is under the new key; the old key is dropped and nothing notices.
    const sealed = await rows<{ a: string; r: string }>(
      db,
      sql`SELECT access_token_enc AS a, refresh_token_enc AS r FROM xero_grants`,
    );
    for (const { a, r } of sealed) {
      expect(a.startsWith(`k1.${bothBox.keyId}.`)).toBe(true);
      expect(r.startsWith(`k1.${bothBox.keyId}.`)).toBe(true);
    }
    const newBox = await createSecretBox(NEW);
    await everythingWorks(newBox);
    // Idempotent: a second run finds nothing to do.
    expect(await resealGrantTokens(db, newBox)).toMatchObject({ resealed: 0, current: 4 });
  });

  it('never overwrites a token a refresh saved after the reseal read it, and leaves an unreadable row as it is', async () => {
    const { db } = await fresh();
    const OLD = generateKeyBase64();
    const oldBox = await createSecretBox(OLD);
    const a = await connectedOrganization(db, oldBox, sandbox, 'Race A');
    const b = await connectedOrganization(db, oldBox, sandbox, 'Race B');
    const bothBox = await createSecretBox(generateKeyBase64(), [OLD]);
    const read = await rows<{
      id: string;
      sealContext: string | null;
      tokenVersion: number;
      accessTokenEnc: string | null;
      refreshTokenEnc: string;
    }>(
      db,
      sql`SELECT id, seal_context AS "sealContext", token_version AS "tokenVersion",
                 access_token_enc AS "accessTokenEnc", refresh_token_enc AS "refreshTokenEnc"
          FROM xero_grants ORDER BY id`,
    );
    // A refresh (a server with the old key only, mid-rollout) saves grant A's new token pair.
    await db.execute(
      sql`UPDATE xero_grants SET access_expires_at = now() + interval '5 minutes', refresh_token_issued_at = now() - interval '8 days' WHERE id = ${a.grantId}`,
    );
    expect(await refreshExpiringTokens(db, refreshDeps(oldBox))).toMatchObject({ refreshed: 1 });
    const refreshed = await grantRow(db, a.grantId);

    const counts = await resealRows(db, bothBox, read);
    expect(counts).toMatchObject({ resealed: 2, busy: 0 });
    // A was read again and resealed from its new token, not from the one read before the refresh.
    const after = await grantRow(db, a.grantId);
    const ctx = { id: a.grantId, sealContext: null };
    expect(await bothBox.open(after.refresh_token_enc, tokenContext(ctx, 'refresh'))).toBe(
      await oldBox.open(refreshed.refresh_token_enc, tokenContext(ctx, 'refresh')),
    );
    expect(after.token_version).toBe(refreshed.token_version);

    // A row under a key nobody configured is reported and left untouched.
    const stranger = await createSecretBox(generateKeyBase64());
    await sealUnder(db, bothBox, stranger, b.grantId);
    const untouched = await grantRow(db, b.grantId);
    const report = await resealGrantTokens(db, bothBox);
    expect(report).toMatchObject({
      unreadable: 1,
      unreadableGrants: [
        { grant: b.grantId, reason: `sealed under key ${stranger.keyId}, which is not configured` },
      ],
    });
    expect((await grantRow(db, b.grantId)).refresh_token_enc).toBe(untouched.refresh_token_enc);
  });
});

describe('leases cover the work', () => {
  it('two replicas and a slow token endpoint: each refresh token is redeemed once', async () => {
    const { db } = await fresh();
    const box = await createSecretBox(generateKeyBase64());
    for (let i = 1; i <= 6; i++) await connectedOrganization(db, box, sandbox, `Slow ${i}`);
    await allDue(db);
    // A slow token endpoint in front of the sandbox: each call waits before it reaches Xero.
    const slowMs = 700;
    const slowFetch: typeof fetch = async (input, init) => {
      if (String(input instanceof Request ? input.url : input).endsWith('/connect/token'))
        await new Promise((r) => setTimeout(r, slowMs));
      return fetch(input, init);
    };
    const config = { ...xeroConfigFor(sandbox), timeoutMs: 1500 };
    // The lease outlasts one call (its timeout) with a margin, but not the batch of six (over 4 s).
    const leaseMs = 2500;
    const replica = (owner: string) =>
      refreshExpiringTokens(
        db,
        refreshDeps(box, { owner, leaseMs, xero: createXeroClient(config, slowFetch) }),
      );
    const before = stats();
    const first = replica('replica-a');
    // The second replica's tick comes when the first one's batch lease has run out (its claim is seen
    // first, so a slow machine only makes the first replica's batch longer).
    await until(
      async () =>
        (
          await rows<{ n: number }>(
            db,
            sql`SELECT count(*)::int AS n FROM xero_grants WHERE refresh_lease_owner = 'replica-a'`,
          )
        )[0]?.n,
      (n) => n === 6,
      5000,
      20,
    );
    await new Promise((r) => setTimeout(r, leaseMs + 300));
    const [a, b] = await Promise.all([first, replica('replica-b')]);
    expect(stats().refreshReusedInGrace).toBe(before.refreshReusedInGrace);
    expect(stats().refreshGrants).toBe(before.refreshGrants + 6);
    expect(a.refreshed + b.refreshed).toBe(6);
    // It did contend: the second replica took grants the first had claimed, and the first skipped them.
    expect(b.refreshed).toBeGreaterThan(0);
    expect(a.leaseLost).toBe(b.refreshed);
    const versions = await rows<{ v: number }>(db, sql`SELECT token_version AS v FROM xero_grants`);
    expect(versions.map((r) => r.v)).toEqual([2, 2, 2, 2, 2, 2]);
  });
});
