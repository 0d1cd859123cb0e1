import { sql } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { migratedDatabase } from './support/databases.js';
import type { Cluster } from './support/postgres.js';
import { type ServerProcess, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import {
  captureLog,
  connectedOrganization,
  openDatabase,
  queueBacklog,
  type Sandbox,
  sandboxEnv,
  testBox,
} from './support/ticks.js';
import { until } from './support/until.js';

let cluster: Cluster;
let sandbox: Sandbox;
beforeAll(async () => {
  [cluster, sandbox] = await Promise.all([sharedCluster(), startXeroSandbox({ port: 0 })]);
});
afterAll(async () => {
  await sandbox?.close();
  await cluster?.remove();
});

const TENANTS = 20;
const PER_TENANT = 50;

function tickingServer(url: string): Promise<ServerProcess> {
  return spawnServer({
    env: {
      DATABASE_URL: url,
      ...sandboxEnv(sandbox),
      TICK_INTERVAL_MS: '200',
      PUSH_BATCH_SIZE: '100',
    },
  });
}

describe('two replicas', () => {
  it('push 1,000 invoices across 20 tenants exactly once, and refresh each connection once', async () => {
    const url = await migratedDatabase(cluster);
    const { log } = captureLog();
    const handle = await openDatabase(url, log);
    const box = await testBox();
    const tenants: string[] = [];
    for (let i = 0; i < TENANTS; i++) {
      const { org, tenantId, connectionId } = await connectedOrganization(
        handle.db,
        box,
        sandbox,
        `Replica Co ${i}`,
      );
      tenants.push(tenantId);
      await queueBacklog(handle.db, org.id, connectionId, PER_TENANT, 'bulk');
    }
    // Every access token expires within the refresh window: both replicas will want to refresh them.
    await handle.db.execute(sql`UPDATE xero_grants SET access_expires_at = now() + interval '9 minutes'`);
    const refreshesBefore = sandbox.state.statsSnapshot().refreshGrants;
    await handle.close();

    const replicas = await Promise.all([tickingServer(url), tickingServer(url)]);
    const db = new pg.Client(url);
    await db.connect();
    try {
      await Promise.all(replicas.map((r) => r.waitForReady()));
      await until(
        async () =>
          (await db.query(`SELECT count(*)::int AS n FROM invoice_pushes WHERE status = 'pushed'`)).rows[0].n,
        (n: number) => n === TENANTS * PER_TENANT,
        90_000,
        200,
      );

      const stats = sandbox.state.statsSnapshot();
      for (const tenant of tenants) expect(stats.invoicesCreated[tenant]).toBe(PER_TENANT);
      const { rows } = await db.query(
        `SELECT count(DISTINCT xero_invoice_id)::int AS ids, count(*) FILTER (WHERE status <> 'pushed')::int AS other FROM invoice_pushes`,
      );
      expect(rows[0]).toEqual({ ids: TENANTS * PER_TENANT, other: 0 });
      // Each connection refreshed once in this window, whichever replica got there first.
      expect(stats.refreshGrants - refreshesBefore).toBe(TENANTS);
      const versions = await db.query('SELECT DISTINCT token_version FROM xero_grants');
      expect(versions.rows).toEqual([{ token_version: 2 }]);
      // Both replicas really worked the queue.
      expect(replicas.every((r) => r.child.exitCode === null)).toBe(true);
    } finally {
      await db.end();
      await Promise.all(replicas.map((r) => r.stop()));
    }
  });
});
