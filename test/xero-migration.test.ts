// Migration 0005 on a database that has per-tenant token rows (the schema before grants): every
// connection survives, gets a grant holding its tokens, and keeps pushing and refreshing.

import { loadConfig } from '@honest-health/platform';
import { DatabaseHandle, migrate } from '@honest-health/platform/db';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { AccessTokenCache, accessTokens } from '../src/app/connections/grants.js';
import { refreshExpiringTokens } from '../src/app/connections/refresh-tokens.js';
import { openDriver } from '../src/app/databases.js';
import { migrations } from '../src/app/migrations.gen.js';
import { XERO_BUDGET } from '../src/app/push/budget.js';
import { pushDueInvoices } from '../src/app/push/tick.js';
import { createXeroClient } from '../src/app/xero/client.js';
import { freshDatabase } from './support/databases.js';
import type { Cluster } from './support/postgres.js';
import { sharedCluster } from './support/shared-postgres.js';
import { captureLog, type Sandbox, testBox, xeroConfigFor } from './support/ticks.js';

let cluster: Cluster;
let sandbox: Sandbox;
const { log } = captureLog();

beforeAll(async () => {
  [cluster, sandbox] = await Promise.all([sharedCluster(), startXeroSandbox({ port: 0 })]);
});
afterAll(async () => {
  await sandbox?.close();
  await cluster?.remove();
});

describe('migration 0005 (xero_grants)', () => {
  it('moves per-tenant token rows to grants without losing a connection', async () => {
    const url = await freshDatabase(cluster);
    const driver = openDriver(loadConfig({ DATABASE_URL: url }), log);
    await driver.ready();
    const handle = new DatabaseHandle(driver, 'app', log);
    const box = await testBox();
    const index = migrations.findIndex((m) => m.tag === '0005_xero_grants');
    expect(index).toBeGreaterThan(0);
    try {
      await migrate(handle.pool, migrations.slice(0, index), log);

      // The old shape: one consent with two tenants stored as two rows, each with its own copy of the
      // token pair sealed under 'xero:<org>:<tenant>', plus a second organization's row.
      // Written as that schema's release wrote them: today's insert names columns it did not have.
      const oldOrganization = async (name: string) =>
        (
          (await handle.db.execute(
            sql`INSERT INTO organizations (name, api_key_hash) VALUES (${name}, ${crypto.randomUUID()}) RETURNING id`,
          )) as unknown as { rows: { id: string }[] }
        ).rows[0] as { id: string };
      const orgA = await oldOrganization('Old A');
      const orgB = await oldOrganization('Old B');
      const tenants = [1, 2, 3].map(
        (i) => sandbox.state.createTenant({ name: `Old ${i}`, accountCodes: null }).id,
      );
      const consentA = sandbox.state.createGrant({ tenantIds: [tenants[0], tenants[1]] as string[] }).tokens;
      const consentB = sandbox.state.createGrant({ tenantIds: [tenants[2]] as string[] }).tokens;
      const old: { org: string; tenant: string; tokens: Record<string, unknown>; version: number }[] = [
        { org: orgA.id, tenant: tenants[0] as string, tokens: consentA, version: 3 },
        { org: orgA.id, tenant: tenants[1] as string, tokens: consentA, version: 1 },
        { org: orgB.id, tenant: tenants[2] as string, tokens: consentB, version: 7 },
      ];
      const ids: string[] = [];
      for (const row of old) {
        const context = `xero:${row.org}:${row.tenant}`;
        const result = await handle.db.execute<{ id: string }>(sql`
          INSERT INTO xero_connections (organization_id, tenant_id, tenant_name, access_token_enc, refresh_token_enc,
                                        access_expires_at, token_version)
          VALUES (${row.org}, ${row.tenant}, 'Old', ${await box.seal(String(row.tokens.access_token), `${context}:access`)},
                  ${await box.seal(String(row.tokens.refresh_token), `${context}:refresh`)},
                  now() + interval '20 minutes', ${row.version})
          RETURNING id`);
        ids.push((result as unknown as { rows: { id: string }[] }).rows[0]?.id as string);
      }
      await handle.db.execute(sql`
        INSERT INTO invoice_pushes (organization_id, connection_id, idempotency_key, request_hash, payload, status)
        VALUES (${orgA.id}, ${ids[1]}, 'old-push', 'test',
                '{"contact":{"name":"C"},"lineItems":[{"description":"x","quantity":"1","unitAmount":"1.5"}],"date":"2026-11-29","currency":"NZD"}'::jsonb,
                'queued')`);

      const applied = await migrate(handle.pool, migrations, log);
      expect(applied.applied).toContain('0005_xero_grants');

      const direct = new pg.Client(url);
      await direct.connect();
      try {
        const connections = await direct.query(
          `SELECT c.id, c.organization_id, c.tenant_id, c.grant_id, g.organization_id AS grant_org, g.token_version,
                  g.seal_context, g.status
           FROM xero_connections c JOIN xero_grants g ON g.id = c.grant_id ORDER BY g.token_version`,
        );
        // Every connection is still there, with its id, and a grant of its own holding its tokens.
        expect(connections.rows.map((r) => r.id).sort()).toEqual([...ids].sort());
        for (const r of connections.rows) {
          expect(r.grant_id).toBe(r.id);
          expect(r.grant_org).toBe(r.organization_id);
          expect(r.seal_context).toBe(`xero:${r.organization_id}:${r.tenant_id}`);
          expect(r.status).toBe('active');
        }
        expect(connections.rows.map((r) => r.token_version)).toEqual([1, 3, 7]);
        expect((await direct.query('SELECT count(*)::int AS n FROM xero_grants')).rows[0].n).toBe(3);

        // The migrated ciphertexts still open, and push.
        const opened = await accessTokens(
          handle.db,
          box,
          new AccessTokenCache(),
          new Map(ids.map((id) => [id, 0])),
        );
        expect([...opened.values()].every((t) => typeof t === 'string')).toBe(true);
        const xero = createXeroClient(xeroConfigFor(sandbox));
        const pushed = await pushDueInvoices(handle.db, {
          xero,
          box,
          budget: XERO_BUDGET,
          owner: 'after-migration',
          maxAttempts: 12,
          batchSize: 50,
          leaseMs: 60_000,
          backoff: { baseMs: 30_000, maxMs: 3_600_000 },
          log,
        });
        expect(pushed.pushed).toBe(1);
        expect(sandbox.state.statsSnapshot().invoicesCreated[tenants[1] as string]).toBe(1);

        // The first refresh re-seals each grant under its own id.
        await direct.query(
          `UPDATE xero_grants SET access_expires_at = now() + interval '1 minute', refresh_token_issued_at = now() - interval '8 days'`,
        );
        const refreshed = await refreshExpiringTokens(handle.db, {
          xero,
          box,
          owner: 'after-migration',
          refreshWithinMs: 10 * 60_000,
          leaseMs: 60_000,
          batchSize: 50,
          log,
        });
        expect(refreshed.refreshed).toBe(3);
        const after = await direct.query('SELECT seal_context FROM xero_grants');
        expect(after.rows.every((r) => r.seal_context === null)).toBe(true);
      } finally {
        await direct.end();
      }
    } finally {
      await handle.close();
    }
  });
});
