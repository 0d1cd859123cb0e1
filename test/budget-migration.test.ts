// Migration 0013 on a database the previous release has been counting in: the calls its
// per-call timestamp arrays hold carry over into the bounded counters, so the new claim does not spend
// the minute, the day or the app's minute a second time. The arrays stay (the previous release still
// runs beside the new one during a rolling deploy).

import { loadConfig } from '@honest-health/platform';
import { DatabaseHandle, migrate } from '@honest-health/platform/db';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDriver } from '../src/app/databases.js';
import { migrations } from '../src/app/migrations.gen.js';
import { createOrganization } from '../src/app/organizations.js';
import { XERO_BUDGET } from '../src/app/push/budget.js';
import { claimPushes } from '../src/app/push/claim.js';
import { rowsOf } from '../src/app/push/rows.js';
import { freshDatabase } from './support/databases.js';
import type { Cluster } from './support/postgres.js';
import { sharedCluster } from './support/shared-postgres.js';
import { captureLog, queueBacklog } from './support/ticks.js';

let cluster: Cluster;
const { log } = captureLog();

beforeAll(async () => {
  cluster = sharedCluster();
});
afterAll(async () => {
  await cluster?.remove();
});

describe('migration 0013 (bounded budget)', () => {
  it("seeds the counters from the previous release's arrays", async () => {
    const url = await freshDatabase(cluster);
    const driver = openDriver(loadConfig({ DATABASE_URL: url }), log);
    await driver.ready();
    const handle = new DatabaseHandle(driver, 'app', log);
    const index = migrations.findIndex((m) => m.tag === '0013_bounded_budget');
    expect(index).toBeGreaterThan(0);
    try {
      await migrate(handle.pool, migrations.slice(0, index), log);
      const org = await createOrganization(handle.db, 'Counted Before');
      // The previous release's state: 50 calls in the tenant's last 30 s, 4,000 over its last 20 hours
      // (the 50 among them), 9,994 in the app's minute.
      const [connection] = rowsOf<{ id: string }>(
        await handle.db.execute(sql`
          WITH g AS (
            INSERT INTO xero_grants (organization_id, scope, access_token_enc, refresh_token_enc, access_expires_at)
            VALUES (${org.id}, 'offline_access accounting.invoices', 'sealed', 'sealed', now() + interval '1 hour')
            RETURNING id)
          INSERT INTO xero_connections (organization_id, grant_id, tenant_id, budget_minute, budget_day)
          SELECT ${org.id}, g.id, 'counted-tenant',
                 ARRAY(SELECT now() - i * interval '600 ms' FROM generate_series(1, 50) AS i),
                 ARRAY(SELECT now() - i * interval '600 ms' FROM generate_series(1, 50) AS i)
                   || ARRAY(SELECT now() - i * interval '18 seconds' FROM generate_series(1, 3950) AS i)
          FROM g RETURNING id`),
      );
      await handle.db.execute(sql`
        UPDATE xero_app_limits SET budget_minute = ARRAY(
          SELECT now() - (i % 50) * interval '1 second' FROM generate_series(1, 9994) AS i)`);

      await migrate(handle.pool, migrations, log);
      const [seeded] = rowsOf<{ minute: number; day: number; app: number; arrays: number }>(
        await handle.db.execute(sql`
          SELECT xero_window_used(c.budget_minute_counts, c.budget_minute_at, floor(extract(epoch FROM now()))::bigint) AS minute,
                 xero_window_used(c.budget_day_counts, c.budget_day_at, floor(extract(epoch FROM now()) / 3600)::bigint) AS day,
                 xero_window_used(a.budget_minute_counts, a.budget_minute_at, floor(extract(epoch FROM now()))::bigint) AS app,
                 cardinality(c.budget_day) AS arrays
          FROM xero_connections c, xero_app_limits a`),
      );
      expect(seeded).toEqual({ minute: 50, day: 4000, app: 9994, arrays: 4000 });

      // The new claim sees them: the app's minute has 6 calls left (the tenant's minute 10).
      await queueBacklog(handle.db, org.id, connection?.id as string, 20, 'after');
      const claim = await claimPushes(handle.db, {
        owner: 'new-release',
        leaseMs: 60_000,
        batchSize: 100,
        budget: { ...XERO_BUDGET, concurrent: 100 },
      });
      expect(claim.pushes).toHaveLength(6);
    } finally {
      await handle.close();
    }
  });
});
