// Refresh what is needed: a grant's access token is renewed ahead of a push due on it, and an
// idle grant's refresh token only once per keep-alive cadence, inside Xero's 60 days ("Unused refresh
// tokens expire after 60 days", developer.xero.com/faq/oauth2). Real Postgres and the sandbox, whose
// refresh tokens expire after 60 days unused on its own clock. The shortened clock: the sandbox's
// clock is advanced and the grants' timestamps are moved back by the same amount, so the database sees
// the same elapsed time without waiting for it.

import type { Database } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import type { DatabaseHandle } from '@honest-health/platform/db';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import {
  KEEP_ALIVE_MS,
  type RefreshTickDeps,
  refreshExpiringTokens,
} from '../src/app/connections/refresh-tokens.js';
import { pushDueInvoices } from '../src/app/push/tick.js';
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
const handles: DatabaseHandle[] = [];
const { log } = captureLog();
const DAY = 86_400_000;

beforeAll(async () => {
  [cluster, sandbox] = await Promise.all([sharedCluster(), startXeroSandbox({ port: 0 })]);
});
afterAll(async () => {
  for (const h of handles) await h.close();
  await sandbox?.close();
  await cluster?.remove();
});

/** Each test on its own database: no other test's grants are due in it. */
async function fresh() {
  const url = await migratedDatabase(cluster, 'refresh');
  const handle = await openDatabase(url, log);
  handles.push(handle);
  return { db: handle.db, url };
}

const refreshes = () => sandbox.state.statsSnapshot().refreshGrants;

function refreshDeps(box: SecretBox, overrides: Partial<RefreshTickDeps> = {}): RefreshTickDeps {
  return refreshTickDeps(sandbox, box, log, overrides);
}

const pushDeps = (box: SecretBox) => pushTickDeps(sandbox, box, log);

/** Time passes: the sandbox's clock moves on, and the database's grant timestamps move back alike. */
async function elapse(db: Database, ms: number) {
  sandbox.state.clock.advance(ms);
  await db.execute(sql`
    UPDATE xero_grants SET
      refresh_token_issued_at = refresh_token_issued_at - ${`${ms} milliseconds`}::interval,
      access_expires_at = access_expires_at - ${`${ms} milliseconds`}::interval`);
}

async function grant(db: Database, id: string) {
  const result = await db.execute(sql`
    SELECT status, token_version, extract(epoch FROM now() - refresh_token_issued_at) * 1000 AS age_ms
    FROM xero_grants WHERE id = ${id}`);
  const row = (result as unknown as { rows: { status: string; token_version: number; age_ms: number }[] })
    .rows[0];
  if (!row) throw new Error(`no grant ${id}`);
  return { ...row, age_ms: Number(row.age_ms) };
}

describe('Fresh tokens first', () => {
  it('a push for an idle grant (token expired long ago) gets a fresh token within one refresh run, ahead of due keep-alives, and is pushed on the next push run', async () => {
    const { db, url } = await fresh();
    const box = await testBox();
    // Idle grants whose keep-alive is due, their access tokens expired two days ago: older than the
    // pushing grant's, so an order by expiry alone would fill the batch with them.
    const idle = [];
    for (let i = 1; i <= 4; i++) idle.push(await connectedOrganization(db, box, sandbox, `Idle ${i}`));
    await db.execute(sql`
      UPDATE xero_grants SET access_expires_at = now() - interval '2 days',
                             refresh_token_issued_at = now() - interval '8 days'`);
    const busy = await connectedOrganization(db, box, sandbox, 'Busy after a day');
    await db.execute(sql`
      UPDATE xero_grants SET access_expires_at = now() - interval '1 day',
                             refresh_token_issued_at = now() - interval '1 day' - interval '30 minutes'
      WHERE id = ${busy.grantId}`);

    // The claim finds the push's token stale: deferred, its attempt given back.
    const id = await queuePush(db, busy.org.id, 'fresh-first-1');
    expect(await pushDueInvoices(db, pushDeps(box))).toMatchObject({ claimed: 1, deferred: 1, pushed: 0 });
    expect(await pushRow(url, id)).toMatchObject({ status: 'queued', attempts: 0 });

    // One refresh run, room for two grants: the pushing grant first, then one keep-alive.
    const before = refreshes();
    const run = await refreshExpiringTokens(db, refreshDeps(box, { batchSize: 2 }));
    expect(run).toMatchObject({ claimed: 2, refreshed: 2 });
    expect(refreshes()).toBe(before + 2);
    expect(await grant(db, busy.grantId)).toMatchObject({ status: 'active', token_version: 2 });

    // The next push run after the deferral (15 s, elapsed here) sends it with the fresh token.
    await db.execute(sql`UPDATE invoice_pushes SET next_attempt_at = now() WHERE id = ${id}`);
    expect(await pushDueInvoices(db, pushDeps(box))).toMatchObject({ claimed: 1, pushed: 1 });
    expect(await pushRow(url, id)).toMatchObject({ status: 'pushed', attempts: 1 });
    expect(sandbox.state.statsSnapshot().invoicesCreated[busy.tenantId]).toBe(1);
  });

  it('a push due within the horizon has its grant refreshed before it falls due; one due later does not yet', async () => {
    const { db } = await fresh();
    const box = await testBox();
    const soon = await connectedOrganization(db, box, sandbox, 'Due soon');
    const later = await connectedOrganization(db, box, sandbox, 'Due later');
    await db.execute(sql`UPDATE xero_grants SET access_expires_at = now() - interval '3 hours'`);
    const a = await queuePush(db, soon.org.id, 'soon-1');
    const b = await queuePush(db, later.org.id, 'later-1');
    await db.execute(
      sql`UPDATE invoice_pushes SET next_attempt_at = now() + interval '4 minutes' WHERE id = ${a}`,
    );
    await db.execute(
      sql`UPDATE invoice_pushes SET next_attempt_at = now() + interval '3 hours' WHERE id = ${b}`,
    );

    const run = await refreshExpiringTokens(db, refreshDeps(box, { aheadMs: 10 * 60_000 }));
    expect(run).toMatchObject({ claimed: 1, refreshed: 1 });
    expect((await grant(db, soon.grantId)).token_version).toBe(2);
    expect((await grant(db, later.grantId)).token_version).toBe(1);
  });
});

describe('Idle grants', () => {
  it('are not refreshed on every run: none in 20 runs, then one when its keep-alive falls due', async () => {
    const { db } = await fresh();
    const box = await testBox();
    const grants = [];
    for (let i = 1; i <= 10; i++) grants.push(await connectedOrganization(db, box, sandbox, `Quiet ${i}`));
    // A day idle: every access token expired long ago, no push due.
    await db.execute(sql`
      UPDATE xero_grants SET access_expires_at = now() - interval '1 day',
                             refresh_token_issued_at = now() - interval '1 day'`);
    const before = refreshes();
    for (let run = 0; run < 20; run++) {
      expect(await refreshExpiringTokens(db, refreshDeps(box))).toMatchObject({ claimed: 0 });
    }
    expect(refreshes()).toBe(before);

    const first = grants[0] as (typeof grants)[number];
    await db.execute(sql`
      UPDATE xero_grants SET refresh_token_issued_at = now() - interval '7 days' - interval '1 minute'
      WHERE id = ${first.grantId}`);
    for (let run = 0; run < 20; run++) await refreshExpiringTokens(db, refreshDeps(box));
    expect(refreshes()).toBe(before + 1);
    expect((await grant(db, first.grantId)).token_version).toBe(2);
  });
});

describe('Refresh-token keep-alive', () => {
  it("with a shortened clock, a grant idle for 75 days is kept alive past Xero's 60: refreshed once per cadence, never more often", async () => {
    const { db, url } = await fresh();
    const box = await testBox();
    const idle = await connectedOrganization(db, box, sandbox, 'Idle for months');
    const STEP = 6 * 3_600_000;
    const at: number[] = [];
    const start = refreshes();
    for (let elapsed = STEP; elapsed <= 75 * DAY; elapsed += STEP) {
      await elapse(db, STEP);
      // Two runs per step (replicas, or a run after a run): the second never refreshes again.
      const before = refreshes();
      for (let run = 0; run < 2; run++) {
        const result = await refreshExpiringTokens(db, refreshDeps(box));
        expect(result).toMatchObject({ needsReauth: 0, failed: 0 });
      }
      const made = refreshes() - before;
      expect(made).toBeLessThanOrEqual(1);
      if (made === 1) at.push(elapsed);
    }
    // Every refresh came after a whole cadence, and within a step of it.
    const gaps = at.map((t, i) => t - (i === 0 ? 0 : (at[i - 1] as number)));
    for (const gap of gaps) {
      expect(gap).toBeGreaterThanOrEqual(KEEP_ALIVE_MS);
      expect(gap).toBeLessThanOrEqual(KEEP_ALIVE_MS + STEP);
    }
    expect(at.length).toBeGreaterThanOrEqual(Math.floor((75 * DAY) / (KEEP_ALIVE_MS + STEP)));
    expect(refreshes() - start).toBe(at.length);
    // Still connected, 75 days on: a push gets a fresh token from the kept-alive refresh token.
    const row = await grant(db, idle.grantId);
    expect(row.status).toBe('active');
    expect(row.age_ms).toBeLessThan(KEEP_ALIVE_MS);
    await elapse(db, 3_600_000); // past the last refresh's 30-minute access token
    const id = await queuePush(db, idle.org.id, 'after-75-days');
    expect(await refreshExpiringTokens(db, refreshDeps(box))).toMatchObject({ refreshed: 1 });
    expect(await pushDueInvoices(db, pushDeps(box))).toMatchObject({ pushed: 1 });
    expect(await pushRow(url, id)).toMatchObject({ status: 'pushed' });
  });
});
