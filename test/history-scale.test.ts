// A tenant with 1,000,000 settled pushes: a status-filtered list reads that status's newest rows
// through an index (read from the plan), and a disconnect writes the open pushes only, none of the
// history (rows counted by their xmin). Timings are bench/bounded.ts's, never asserted here.
import type { Database } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import type { DatabaseHandle } from '@honest-health/platform/db';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { listPushes } from '../src/app/invoices/store.js';
import { detachSettledPushes } from '../src/app/push/detach-settled.js';
import { migratedDatabase } from './support/databases.js';
import { currentXid, rowsWrittenSince, seedHistory } from './support/history.js';
import type { Cluster } from './support/postgres.js';
import { type ServerProcess, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import {
  captureLog,
  connectedGrant,
  openDatabase,
  type Sandbox,
  sandboxEnv,
  testBox,
} from './support/ticks.js';

const HISTORY = 1_000_000;
const REFERENCING = 3000;
const OPEN = 5;

let cluster: Cluster;
let sandbox: Sandbox;
let url: string;
let handle: DatabaseHandle;
let box: SecretBox;
let pool: pg.Pool;
let server: ServerProcess;
let org: { id: string; apiKey: string };
let connectionId: string;
let tenantId: string;

beforeAll(async () => {
  [cluster, sandbox] = await Promise.all([sharedCluster(), startXeroSandbox({ port: 0 })]);
  url = await migratedDatabase(cluster);
  handle = await openDatabase(url, captureLog().log);
  box = await testBox();
  pool = new pg.Pool({ connectionString: url, max: 2 });
  const connected = await connectedGrant(handle.db, box, sandbox, 'History Ltd', 1);
  org = connected.org;
  connectionId = connected.connectionIds[0] as string;
  tenantId = connected.tenantIds[0] as string;
  await seedHistory(pool, {
    organizationId: org.id,
    connectionId,
    tenantId,
    settled: HISTORY,
    settledReferencing: REFERENCING,
    open: OPEN,
  });
  server = await spawnServer({
    env: {
      DATABASE_URL: url,
      API_KEY_REFRESH_MS: '100',
      TICK_INTERVAL_MS: '3600000',
      ...sandboxEnv(sandbox),
    },
  });
  await server.waitForReady();
}, 600_000);
afterAll(async () => {
  await server?.stop();
  await pool?.end();
  await handle?.close();
  await sandbox?.close();
  await cluster?.remove();
});

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

const nodesOf = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodesOf)];

describe(`a tenant with ${HISTORY.toLocaleString('en')} settled pushes`, () => {
  it('?status=dead reads the newest dead rows through (organization_id, status, created_at, id)', async () => {
    // The statement the API runs, as Drizzle builds it, then EXPLAIN ANALYZE of exactly that.
    let statement: { query: string; params: unknown[] } | undefined;
    const db = drizzle({
      client: pool,
      logger: {
        logQuery: (query, params) => {
          statement = { query, params };
        },
      },
    });
    const rows = await listPushes(db as unknown as Database, org.id, { status: 'dead', limit: 21 });
    expect(rows).toHaveLength(21);
    if (!statement) throw new Error('no statement');
    const { rows: explained } = await pool.query(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${statement.query}`,
      statement.params,
    );
    const plan = (explained[0] as { 'QUERY PLAN': { Plan: PlanNode }[] })['QUERY PLAN'][0]?.Plan as PlanNode;
    const nodes = nodesOf(plan);
    expect(nodes.map((n) => n['Index Name'])).toContain('invoice_pushes_org_status_created_idx');
    expect(nodes.some((n) => n['Node Type'] === 'Seq Scan' || n['Node Type'] === 'Sort')).toBe(false);
    const read = nodes
      .filter((n) => n['Node Type'].includes('Scan'))
      .reduce(
        (sum, n) =>
          sum + (n['Actual Rows'] ?? 0) * (n['Actual Loops'] ?? 1) + (n['Rows Removed by Filter'] ?? 0),
        0,
      );
    expect(read).toBeLessThanOrEqual(21);

    const res = await server.get('/api/invoices?status=dead&limit=20', {
      headers: { authorization: `Bearer ${org.apiKey}` },
    });
    expect(res.status).toBe(200);
    const page = (await res.json()) as { data: { status: string }[] };
    expect(page.data).toHaveLength(20);
    expect(page.data.every((d) => d.status === 'dead')).toBe(true);
  });

  it('a disconnect writes the open pushes and none of the history', async () => {
    // Rows settled before settling let go of the connection are detached by the sweep tick first.
    expect(await detachSettledPushes(handle.db)).toEqual({ detached: REFERENCING });
    const xid = await currentXid(pool);
    const res = await server.get(`/api/connections/${connectionId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${org.apiKey}` },
    });
    expect(res.status).toBe(204);
    expect(await rowsWrittenSince(pool, xid)).toBe(OPEN);
    const { rows } = await pool.query<{ status: string; n: number; referencing: number }>(
      `SELECT status, count(*)::int AS n, count(connection_id)::int AS referencing FROM invoice_pushes
       WHERE tenant_id = $1 GROUP BY status ORDER BY status`,
      [tenantId],
    );
    expect(rows).toEqual([
      { status: 'awaiting_connection', n: OPEN, referencing: 0 },
      { status: 'dead', n: HISTORY / 50, referencing: 0 },
      { status: 'pushed', n: HISTORY - HISTORY / 50 + REFERENCING, referencing: 0 },
    ]);
  });
});
