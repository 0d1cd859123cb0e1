// The sweep's detach pass (src/app/push/detach-settled.ts): settled pushes that still reference their
// connection (a release that predates settle's clearing wrote them) let go of it; after a pass that
// found none, the sweep rests, since finding none reads every open push.

import { createSecretBox } from '@honest-health/platform/crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveGrant } from '../../src/app/connections/grants.js';
import { createOrganization } from '../../src/app/organizations.js';
import { restingDetach } from '../../src/app/push/detach-settled.js';
import { type InProcessApp, startInProcess } from '../support/in-process.js';
import { TEST_TOKEN_KEY } from '../support/server.js';

let app: InProcessApp;
let orgId: string;
let connectionId: string;
beforeAll(async () => {
  app = await startInProcess();
  const org = await createOrganization(app.database.db, 'Sweep Ltd');
  orgId = org.id;
  const saved = await saveGrant(app.database.db, await createSecretBox(TEST_TOKEN_KEY), {
    organizationId: org.id,
    authEventId: null,
    scope: 'offline_access accounting.invoices',
    tokens: { accessToken: 'access', refreshToken: 'refresh', expiresAt: new Date(Date.now() + 1_800_000) },
    tenants: [{ tenantId: crypto.randomUUID(), tenantName: 'Sweep', connectionId: null, authEventId: null }],
  });
  connectionId = saved.connected[0]?.id as string;
});
afterAll(async () => {
  await app?.close();
});

/** A push as the previous release settles one: pushed, its connection kept. */
async function settledByPreviousRelease(key: string): Promise<void> {
  await app.database.pool.query(
    `INSERT INTO invoice_pushes (organization_id, connection_id, idempotency_key, request_hash, payload, status)
     VALUES ($1, $2, $3, 'test', '{}'::jsonb, 'pushed')`,
    [orgId, connectionId, key],
  );
}

async function referencing(): Promise<number> {
  const { rows } = await app.database.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM invoice_pushes WHERE status = 'pushed' AND connection_id IS NOT NULL`,
  );
  return rows[0]?.n ?? 0;
}

describe('the sweep of settled pushes that still reference their connection', () => {
  it('runs every tick while it finds some, then rests for its period after a pass that found none', async () => {
    let now = 0;
    const detach = restingDetach(600_000, () => now);
    await settledByPreviousRelease('old-1');
    expect(await detach(app.database.db)).toEqual({ detached: 1 });
    // It found one: the next tick looks again, finds none, and rests.
    now += 60_000;
    expect(await detach(app.database.db)).toEqual({ detached: 0 });
    await settledByPreviousRelease('old-2');
    for (let tick = 0; tick < 9; tick++) {
      now += 60_000;
      expect(await detach(app.database.db)).toEqual({ detached: 0 });
    }
    expect(await referencing()).toBe(1);
    // Its period over, the next pass detaches what the previous release left meanwhile.
    now += 60_000;
    expect(await detach(app.database.db)).toEqual({ detached: 1 });
    expect(await referencing()).toBe(0);
  });
});
