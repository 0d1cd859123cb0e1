import { sql } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { type FaultProxy, startFaultProxy } from './support/fault-proxy.js';
import { type Cluster, startCluster, startStandby, waitForReplay } from './support/postgres.js';
import { spawnServer } from './support/server.js';
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

// The incident: the pool stays pinned to a demoted, read-only node while the background writes
// (invoice pushes, token refreshes) fail with 25006. Here the ticks and /readyz must detect it,
// dispose the pool and recover on the next tick, with nothing lost and no restart.

let primary: Cluster;
let standby: Cluster;
let proxy: FaultProxy;
let sandbox: Sandbox;

beforeAll(async () => {
  [primary, sandbox] = await Promise.all([startCluster(), startXeroSandbox({ port: 0 })]);
  standby = await startStandby(primary);
  proxy = await startFaultProxy(primary.port);
});
afterAll(async () => {
  await proxy?.close();
  await sandbox?.close();
  await standby?.remove();
  await primary?.remove();
});

describe('the incident, with the ticks', () => {
  it('pinned to a read-only node: ticks and /readyz detect, dispose, and recover; nothing is lost', async () => {
    const { log } = captureLog();
    const handle = await openDatabase(primary.url(), log);
    const box = await testBox();
    const { org, tenantId, connectionId } = await connectedOrganization(
      handle.db,
      box,
      sandbox,
      'Incident Co',
    );

    const server = await spawnServer({
      env: {
        DATABASE_URL: `postgres://postgres@127.0.0.1:${proxy.port}/postgres`,
        TICK_INTERVAL_MS: '300',
        ...sandboxEnv(sandbox),
      },
    });
    const direct = new pg.Client(primary.url());
    await direct.connect();
    try {
      await server.waitForReady();
      // Pin: every connection the server opens from now on lands on the standby.
      proxy.setTarget(standby.port);
      proxy.dropAll();
      await until(
        async () => (await (await server.get('/readyz')).json()) as { checks: { database: string } },
        (b) => b.checks.database === 'read_only',
      );

      // Work arrives while the server is pinned: 20 due pushes and a token about to expire.
      await queueBacklog(handle.db, org.id, connectionId, 20, 'incident');
      await handle.db.execute(sql`UPDATE xero_grants SET access_expires_at = now() + interval '5 minutes'`);
      await waitForReplay(primary, standby);
      await server.waitForLog((l) => l.msg === 'tick crashed' && l.tick === 'push-invoices', 15_000);
      expect(server.logs.some((l) => l.msg === 'database pool poisoned' && l.reason === '25006')).toBe(true);

      // The failover completes: new connections reach the primary. Old ones stay pinned until disposed.
      proxy.setTarget(primary.port);
      const pushed = await until(
        async () =>
          (await direct.query(`SELECT count(*)::int AS n FROM invoice_pushes WHERE status = 'pushed'`))
            .rows[0].n,
        (n: number) => n === 20,
      );
      expect(pushed).toBe(20);
      expect(sandbox.state.statsSnapshot().invoicesCreated[tenantId]).toBe(20);
      const conn = await until(
        async () =>
          (
            await direct.query(
              'SELECT c.status, g.token_version FROM xero_connections c JOIN xero_grants g ON g.id = c.grant_id WHERE c.id = $1',
              [connectionId],
            )
          ).rows[0],
        (c: { token_version: number; status: string }) => c.token_version === 2,
      );
      expect(conn.status).toBe('active');
      const ready = await until(
        async () => (await server.get('/readyz')).status,
        (s) => s === 200,
      );
      expect(ready).toBe(200);
      expect(server.child.exitCode).toBeNull();
    } finally {
      await direct.end();
      await server.stop();
      await handle.close();
      proxy.setTarget(primary.port);
    }
  });

  it('SIGTERM in the middle of a tick: shutdown awaits it and nothing is lost', async () => {
    const { log } = captureLog();
    await primary.query('CREATE DATABASE sigterm');
    const url = primary.url('sigterm');
    const handle = await openDatabase(url, log);
    const box = await testBox();
    const { org, connectionId } = await connectedOrganization(handle.db, box, sandbox, 'Slow Xero Co');
    sandbox.state.setLimits({ latencyMs: 1500 });
    const server = await spawnServer({
      env: { DATABASE_URL: url, TICK_INTERVAL_MS: '200', ...sandboxEnv(sandbox) },
    });
    try {
      await server.waitForReady();
      await queueBacklog(handle.db, org.id, connectionId, 1, 'slow');
      // Wait until the push is claimed (its lease written) and Xero is holding the request.
      await until(
        async () =>
          (
            await handle.pool.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM invoice_pushes WHERE lease_owner IS NOT NULL`,
            )
          ).rows[0]?.n ?? 0,
        (n) => n === 1,
      );
      server.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      const { rows } = await handle.pool.query<{ status: string; lease_owner: string | null }>(
        `SELECT status, lease_owner FROM invoice_pushes WHERE idempotency_key = 'slow-1'`,
      );
      expect(rows[0]).toEqual({ status: 'pushed', lease_owner: null });
      const stop = server.logs.find((l) => l.msg === 'shutdown stage' && l.stage === 'stop loops');
      expect(Number(stop?.ms)).toBeGreaterThan(300);
    } finally {
      sandbox.state.setLimits({ latencyMs: 0 });
      server.kill('SIGKILL');
      await handle.close();
    }
  });
});
