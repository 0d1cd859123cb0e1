import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Miniflare } from 'miniflare';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNeonProxy } from '../dev/neon-proxy/server.js';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { migratedDatabase, neonUrl } from './support/databases.js';
import type { Cluster } from './support/postgres.js';
import { TEST_TOKEN_KEY } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import {
  captureLog,
  connectedOrganization,
  openDatabase,
  queuePush,
  type Sandbox,
  testBox,
} from './support/ticks.js';
import { until } from './support/until.js';
import { workerJsonLines } from './support/worker-log.js';
import { bundleModule, runScheduled, workerBundle, wranglerSettings } from './support/wrangler.js';

// Two Workers (two workerd processes, so two isolates that share nothing but the database) on one
// Postgres through the local Neon proxy, with Xero answering slowly: every invoice arrives through one
// of them (its POST starts a push run of its own), and both crons fire at once. Cloudflare serialises
// none of these runs, so only the leases in the database keep each push and each refresh to one run.
// Within one isolate, a cron that fires while a request's push run is in flight runs its own after it.

type NeonProxy = Awaited<ReturnType<typeof startNeonProxy>>;

const XERO_LATENCY_MS = 400;
const ROUNDS = 8;

let cluster: Cluster;
let sandbox: Sandbox;
let proxy: NeonProxy;
let slowXero: { url: string; server: Server };
let outdir: string;
const started: Miniflare[] = [];

/** The sandbox behind a delay: every call, the token endpoint's included, answers after XERO_LATENCY_MS. */
async function startSlowXero(target: string): Promise<{ url: string; server: Server }> {
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (typeof value === 'string' && name !== 'host' && name !== 'connection') headers.set(name, value);
    }
    const method = req.method ?? 'GET';
    const answer = await fetch(`${target}${req.url ?? '/'}`, {
      method,
      headers,
      ...(method === 'GET' || method === 'HEAD' ? {} : { body: Buffer.concat(chunks) }),
    });
    const body = Buffer.from(await answer.arrayBuffer());
    await new Promise((r) => setTimeout(r, XERO_LATENCY_MS));
    const out: Record<string, string> = {};
    answer.headers.forEach((value, name) => {
      if (name !== 'content-encoding' && name !== 'content-length' && name !== 'transfer-encoding') {
        out[name] = value;
      }
    });
    res.writeHead(answer.status, out).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

beforeAll(async () => {
  outdir = await workerBundle();
  [cluster, sandbox] = await Promise.all([sharedCluster(), startXeroSandbox({ port: 0 })]);
  proxy = await startNeonProxy({ upstream: cluster.url() });
  slowXero = await startSlowXero(sandbox.url);
}, 180_000);
afterAll(async () => {
  await Promise.allSettled(started.map((mf) => mf.dispose()));
  slowXero?.server.close();
  await proxy?.close();
  await sandbox?.close();
  await cluster?.remove();
});

function worker(url: string): Miniflare {
  const mf = new Miniflare({
    ...workerJsonLines(),
    ...bundleModule(outdir, 'worker.js'),
    compatibilityDate: wranglerSettings.compatibility_date,
    compatibilityFlags: wranglerSettings.compatibility_flags,
    bindings: {
      TOKEN_ENCRYPTION_KEY: TEST_TOKEN_KEY,
      NEON_LOCAL_PROXY: proxy.url,
      LOG_LEVEL: 'warn',
      METRICS_PUBLIC: 'true',
      DATABASE_URL: neonUrl(url),
      XERO_API_URL: slowXero.url,
      XERO_IDENTITY_URL: `${slowXero.url}/identity`,
      XERO_CLIENT_ID: 'sandbox-client',
      XERO_CLIENT_SECRET: 'sandbox-secret',
    },
  });
  started.push(mf);
  return mf;
}

const invoice = (n: number) =>
  JSON.stringify({
    contact: { name: `Customer ${n}` },
    date: '2026-12-01',
    currency: 'NZD',
    lineItems: [{ description: 'Widget', quantity: '1', unitAmount: '10.00' }],
  });

describe('two Workers on one database', () => {
  it('send every push once and redeem every refresh token once, however their runs overlap', async () => {
    const url = await migratedDatabase(cluster);
    const { log } = captureLog();
    const handle = await openDatabase(url, log);
    const { org, tenantId, grantId } = await connectedOrganization(
      handle.db,
      await testBox(),
      sandbox,
      'Two Workers Co',
    );
    await handle.close();
    const db = new pg.Client(url);
    await db.connect();
    const workers = [worker(url), worker(url)];
    const before = sandbox.state.statsSnapshot();
    try {
      // Boot both isolates first, so the rounds race runs, not boots.
      for (const mf of workers) expect((await mf.dispatchFetch('http://worker/readyz')).status).toBe(200);
      let accepted = 0;
      for (let round = 0; round < ROUNDS; round++) {
        // The grant's access token has a few minutes left: the refresh tick of each run wants it.
        await db.query(
          `UPDATE xero_grants SET access_expires_at = now() + interval '3 minutes' WHERE id = $1`,
          [grantId],
        );
        const posts = workers.map((mf, i) =>
          mf.dispatchFetch('http://worker/api/invoices', {
            method: 'POST',
            headers: {
              authorization: `Bearer ${org.apiKey}`,
              'content-type': 'application/json',
              'idempotency-key': `round-${round}-${i}`,
            },
            body: invoice(round * 2 + i),
          }),
        );
        const answers = await Promise.all(posts);
        for (const res of answers) {
          expect(res.status).toBe(202);
          accepted += 1;
        }
        await Promise.all(workers.map((mf) => runScheduled(mf)));
      }
      // Whatever a round left (a push whose lease another run held) goes out on a later cron.
      const pushed = await until(
        async () => {
          const { rows } = await db.query(
            `SELECT count(*)::int AS n FROM invoice_pushes WHERE status = 'pushed'`,
          );
          if (rows[0].n < accepted) await Promise.all(workers.map((mf) => runScheduled(mf)));
          return rows[0].n as number;
        },
        (n) => n === accepted,
        60_000,
        200,
      );
      const after = sandbox.state.statsSnapshot();
      const figures = {
        accepted,
        pushed,
        invoicesCreated: after.invoicesCreated[tenantId] ?? 0,
        invoiceCalls: after.invoiceCalls - before.invoiceCalls,
        idempotentReplays: after.idempotentReplays - before.idempotentReplays,
        idempotencyConflicts: after.idempotencyConflicts - before.idempotencyConflicts,
        refreshGrants: after.refreshGrants - before.refreshGrants,
        refreshReusedInGrace: after.refreshReusedInGrace - before.refreshReusedInGrace,
      };
      console.log(`two workers: ${JSON.stringify(figures)}`);
      expect(figures.invoicesCreated).toBe(accepted);
      expect(figures.invoiceCalls).toBe(accepted);
      expect(figures.idempotentReplays).toBe(0);
      expect(figures.idempotencyConflicts).toBe(0);
      expect(figures.refreshGrants).toBeGreaterThan(0);
      expect(figures.refreshReusedInGrace).toBe(0);
    } finally {
      await db.end();
    }
  }, 240_000);

  it("a cron that fires during a request's push run runs its own after it: a push due meanwhile goes out", async () => {
    const url = await migratedDatabase(cluster);
    const { log } = captureLog();
    const handle = await openDatabase(url, log);
    const { org } = await connectedOrganization(handle.db, await testBox(), sandbox, 'Cron Behind Co');
    const db = new pg.Client(url);
    await db.connect();
    const mf = worker(url);
    try {
      expect((await mf.dispatchFetch('http://worker/readyz')).status).toBe(200);
      const res = await mf.dispatchFetch('http://worker/api/invoices', {
        method: 'POST',
        headers: {
          authorization: `Bearer ${org.apiKey}`,
          'content-type': 'application/json',
          'idempotency-key': 'cron-behind-1',
        },
        body: invoice(1),
      });
      expect(res.status).toBe(202);
      // The request's run has claimed its push and waits on Xero: a push that falls due now (a retry's
      // time come) is not in its claim.
      await until(
        async () =>
          (await db.query(`SELECT count(*)::int AS n FROM invoice_pushes WHERE lease_owner IS NOT NULL`))
            .rows[0].n,
        (n) => n === 1,
        10_000,
        10,
      );
      const due = await queuePush(handle.db, org.id, 'cron-behind-2');
      await runScheduled(mf);
      const { rows } = await db.query('SELECT status FROM invoice_pushes WHERE id = $1', [due]);
      expect(rows[0].status).toBe('pushed');
    } finally {
      await db.end();
      await handle.close();
    }
  });

  it("keeps a disconnect's Xero call alive past the answer (waitUntil), however slow Xero is", async () => {
    const url = await migratedDatabase(cluster);
    const { log } = captureLog();
    const handle = await openDatabase(url, log);
    const { org, connectionId } = await connectedOrganization(
      handle.db,
      await testBox(),
      sandbox,
      'Disconnect Co',
    );
    await handle.close();
    const mf = worker(url);
    const before = sandbox.state.statsSnapshot().disconnections;
    const res = await mf.dispatchFetch(`http://worker/api/connections/${connectionId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${org.apiKey}` },
    });
    expect(res.status).toBe(204);
    // Answered before Xero was: the call to Xero outlives the request only through waitUntil.
    expect(sandbox.state.statsSnapshot().disconnections).toBe(before);
    const after = await until(
      async () => sandbox.state.statsSnapshot().disconnections,
      (n) => n > before,
      10_000,
    );
    expect(after).toBe(before + 1);
  });
});
