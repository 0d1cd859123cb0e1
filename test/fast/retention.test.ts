// The retention tick (src/app/push/prune-pushes.ts, PUSH_RETENTION_DAYS): it deletes old pushed and
// dead pushes in bounded batches, and never a push that is open (queued, failed, awaiting a connection),
// leased, or settled within the retention. Off by default.

import { createLogger } from '@honest-health/platform';
import { createSecretBox } from '@honest-health/platform/crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadAppConfig } from '../../src/app/config.js';
import { createOrganization } from '../../src/app/organizations.js';
import { prunePushes } from '../../src/app/push/prune-pushes.js';
import { appTicks, TICKS } from '../../src/app/ticks.js';
import type { XeroClient } from '../../src/app/xero/client.js';
import { type InProcessApp, startInProcess } from '../support/in-process.js';
import { TEST_TOKEN_KEY } from '../support/server.js';

let app: InProcessApp;
let orgId: string;
beforeAll(async () => {
  app = await startInProcess();
  orgId = (await createOrganization(app.database.db, 'Retention Ltd')).id;
});
afterAll(async () => {
  await app?.close();
});
beforeEach(async () => {
  await app.database.pool.query('DELETE FROM invoice_pushes');
});

/** A push in `status`, last updated `days` ago, leased when `leased`. */
async function push(key: string, status: string, days: number, leased = false): Promise<void> {
  await app.database.db.execute(sql`
    INSERT INTO invoice_pushes (organization_id, idempotency_key, request_hash, payload, status, created_at,
                                updated_at, lease_owner, lease_expires_at)
    VALUES (${orgId}, ${key}, 'test', '{}'::jsonb, ${status}, now() - ${days + 1} * interval '1 day',
            now() - ${days} * interval '1 day',
            ${leased ? 'replica-a' : null}, ${leased ? sql`now() + interval '1 minute'` : null})`);
}

async function keys(): Promise<string[]> {
  const { rows } = await app.database.pool.query<{ idempotency_key: string }>(
    'SELECT idempotency_key FROM invoice_pushes ORDER BY idempotency_key',
  );
  return rows.map((r) => r.idempotency_key);
}

describe('push retention', () => {
  it('deletes only pushed and dead pushes older than the retention, never an open or leased one', async () => {
    await push('old-pushed', 'pushed', 40);
    await push('old-dead', 'dead', 31);
    await push('new-pushed', 'pushed', 29);
    await push('new-dead', 'dead', 1);
    // Open work, however old: due, backed off, leased, or waiting for a connection.
    await push('old-queued', 'queued', 400);
    await push('old-failed', 'failed', 400);
    await push('old-failed-leased', 'failed', 400, true);
    await push('old-queued-leased', 'queued', 400, true);
    await push('old-awaiting', 'awaiting_connection', 400);
    // A settled push still carrying a lease (a settle racing the tick): left for the next run.
    await push('old-pushed-leased', 'pushed', 400, true);

    expect(await prunePushes(app.database.db, { retentionDays: 30, batchSize: 100, maxBatches: 10 })).toEqual(
      {
        pruned: 2,
      },
    );
    expect(await keys()).toEqual([
      'new-dead',
      'new-pushed',
      'old-awaiting',
      'old-failed',
      'old-failed-leased',
      'old-pushed-leased',
      'old-queued',
      'old-queued-leased',
    ]);
  });

  it('removes at most batchSize × maxBatches rows a run, oldest first', async () => {
    for (let i = 0; i < 7; i++) await push(`pushed-${i}`, 'pushed', 100 - i);
    expect(await prunePushes(app.database.db, { retentionDays: 30, batchSize: 2, maxBatches: 2 })).toEqual({
      pruned: 4,
    });
    expect(await keys()).toEqual(['pushed-4', 'pushed-5', 'pushed-6']);
    expect(await prunePushes(app.database.db, { retentionDays: 30, batchSize: 2, maxBatches: 5 })).toEqual({
      pruned: 3,
    });
    expect(await keys()).toEqual([]);
  });

  it('is off unless PUSH_RETENTION_DAYS is set', async () => {
    const setup = async (env: Record<string, string>) => {
      const config = loadAppConfig({ TOKEN_ENCRYPTION_KEY: TEST_TOKEN_KEY, ...env });
      const box = await createSecretBox(TEST_TOKEN_KEY);
      const log = createLogger('error');
      return appTicks({ config, xero: {} as XeroClient, box, log }).map((t) => t.name);
    };
    expect(await setup({})).not.toContain(TICKS.prune);
    expect(await setup({ PUSH_RETENTION_DAYS: '30' })).toContain(TICKS.prune);
    expect(
      await setup({ PUSH_RETENTION_DAYS: '30', XERO_CLIENT_ID: 'id', XERO_CLIENT_SECRET: 's' }),
    ).toContain(TICKS.prune);
    expect(() => loadAppConfig({ TOKEN_ENCRYPTION_KEY: TEST_TOKEN_KEY, PUSH_RETENTION_DAYS: '0' })).toThrow(
      /PUSH_RETENTION_DAYS/,
    );
  });
});
