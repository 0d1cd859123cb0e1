import { Miniflare } from 'miniflare';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { chooseConnection } from '../src/app/connections/choose.js';
import { freshDatabase } from './support/databases.js';
import { pushStatus, terminateWaitingClaim } from './support/poisoned-claim.js';
import { type Cluster, startCluster, startStandby, waitForReplay } from './support/postgres.js';
import { TEST_TOKEN_KEY } from './support/server.js';
import {
  captureLog,
  connectedOrganization,
  openDatabase,
  queuePush,
  type Sandbox,
  sandboxEnv,
  testBox,
} from './support/ticks.js';
import { until } from './support/until.js';
import { workerJsonLines } from './support/worker-log.js';
import { bundleModule, runScheduled, workerBundle, wranglerSettings } from './support/wrangler.js';

// The Hyperdrive entry (src/runtime/worker-hyperdrive.ts, what `npm run build:worker:hyperdrive`
// bundles) in workerd via Miniflare's `hyperdrives` option: workerd gets a HYPERDRIVE binding whose
// connectionString leads, through Miniflare's local proxy, to a real Postgres. What this cannot show is
// Hyperdrive's own pooling and query cache: locally, as under `wrangler dev`, neither is in the path
// (developers.cloudflare.com/hyperdrive/configuration/local-development/).

let cluster: Cluster;
let sandbox: Sandbox;
let outdir: string;
const started: Miniflare[] = [];

beforeAll(async () => {
  outdir = await workerBundle(['src/runtime/worker-hyperdrive.ts']);
  [cluster, sandbox] = await Promise.all([startCluster(), startXeroSandbox({ port: 0 })]);
}, 180_000);
afterAll(async () => {
  await Promise.allSettled(started.map((mf) => mf.dispose()));
  await sandbox?.close();
  await cluster?.remove();
});

function worker(
  hyperdrive: string | undefined,
  bindings: Record<string, string> = {},
  onLine?: (line: Record<string, unknown>) => void,
  hyperdrives: Record<string, string> = hyperdrive ? { HYPERDRIVE: hyperdrive } : {},
): Miniflare {
  const mf = new Miniflare({
    ...workerJsonLines(onLine),
    ...bundleModule(outdir, 'worker-hyperdrive.js'),
    compatibilityDate: wranglerSettings.compatibility_date,
    compatibilityFlags: wranglerSettings.compatibility_flags,
    hyperdrives: Object.fromEntries(
      Object.entries(hyperdrives).map(([name, url]) => [name, withPassword(url)]),
    ),
    bindings: {
      TOKEN_ENCRYPTION_KEY: TEST_TOKEN_KEY,
      LOG_LEVEL: 'info',
      METRICS_PUBLIC: 'true',
      // wrangler.toml's var: the binding wins over it in this entry.
      DATABASE_DRIVER: 'neon-ws',
      ...bindings,
    },
  });
  started.push(mf);
  return mf;
}

// Miniflare requires a password in a Hyperdrive origin; the test clusters trust local connections.
const PASSWORD = 'hyperdrive-local-7c1f';
function withPassword(url: string): string {
  const u = new URL(url);
  u.password = PASSWORD;
  return u.toString();
}

async function readyz(mf: Miniflare) {
  const res = await mf.dispatchFetch('http://worker/readyz');
  return {
    status: res.status,
    body: (await res.json()) as { status: string; checks: Record<string, string> },
  };
}

async function migrated(): Promise<string> {
  const url = await freshDatabase(cluster);
  const { log } = captureLog();
  await (await openDatabase(url, log)).close();
  return url;
}

async function beats(url: string): Promise<number> {
  return (
    await query(
      url,
      `SELECT coalesce(sum(beats), 0)::int AS n FROM health_heartbeat WHERE instance_id = 'worker'`,
    )
  ).n as number;
}

async function query(url: string, text: string): Promise<Record<string, unknown>> {
  const db = new pg.Client(url);
  await db.connect();
  try {
    return (await db.query(text)).rows[0];
  } finally {
    await db.end();
  }
}

describe('the Worker through a Hyperdrive binding, in workerd', () => {
  it('/readyz proves a write through the binding, with no DATABASE_URL at all', async () => {
    const url = await migrated();
    const lines: Record<string, unknown>[] = [];
    const mf = worker(url, {}, (line) => lines.push(line));
    expect(await readyz(mf)).toEqual({
      status: 200,
      body: { status: 'ok', checks: { boot: 'ok', database: 'ok' } },
    });
    // Each readiness answer is a write of its own: Hyperdrive caches reads, never writes.
    const first = await beats(url);
    expect(first).toBeGreaterThanOrEqual(1);
    expect((await readyz(mf)).status).toBe(200);
    expect(await beats(url)).toBe(first + 1);
    await until(
      async () => lines.find((l) => l.msg === 'isolate database'),
      (line) => line !== undefined,
      5000,
    );
    expect(lines.find((l) => l.msg === 'isolate database')?.database).toBe('hyperdrive');
    // The binding's connection string holds a password: it is in no log line.
    expect(lines.length).toBeGreaterThan(0);
    expect(JSON.stringify(lines)).not.toContain(PASSWORD);
  });

  it('a read-only answer disposes the pools; once the database takes writes again the next request is ready', async () => {
    const url = await migrated();
    const lines: Record<string, unknown>[] = [];
    const mf = worker(url, {}, (line) => lines.push(line));
    expect((await readyz(mf)).status).toBe(200);
    const dbName = new URL(url).pathname.slice(1);
    await cluster.query(`ALTER DATABASE ${dbName} SET default_transaction_read_only = on`);
    try {
      const readOnly = await readyz(mf);
      expect(readOnly).toEqual({
        status: 503,
        body: { status: 'unavailable', checks: { boot: 'ok', database: 'read_only' } },
      });
      // The probe's pool is thrown away; the app's was never opened by this request (nothing to dispose).
      await until(
        async () => lines.filter((l) => l.msg === 'database pool disposed').map((l) => l.role),
        (roles) => roles.includes('probe'),
        5000,
      );
      expect(lines.some((l) => l.msg === 'database read-only episode started: disposing pools')).toBe(true);
    } finally {
      await cluster.query(`ALTER DATABASE ${dbName} RESET default_transaction_read_only`);
    }
    const before = await beats(url);
    expect(await readyz(mf)).toEqual({
      status: 200,
      body: { status: 'ok', checks: { boot: 'ok', database: 'ok' } },
    });
    expect(await beats(url)).toBe(before + 1);
  });

  it('behind a real standby: read_only, then ready once it is promoted, without a restart', async () => {
    const url = await migrated();
    const dbName = new URL(url).pathname.slice(1);
    const standby = await startStandby(cluster);
    try {
      await waitForReplay(cluster, standby);
      const mf = worker(standby.url(dbName));
      // The boot only reads (the schema is current on the standby too); the probe's write is refused.
      const res = await mf.dispatchFetch('http://worker/readyz?verbose');
      expect(res.status).toBe(503);
      expect(((await res.json()) as { checks: unknown }).checks).toEqual({
        boot: 'ok',
        database: 'read_only',
      });
      await standby.promote();
      const ready = await until(
        () => readyz(mf),
        (r) => r.status === 200,
        15_000,
      );
      expect(ready.body.checks).toEqual({ boot: 'ok', database: 'ok' });
    } finally {
      await standby.remove();
    }
  });

  it('disposes and retries a tick poisoned by a terminated backend (57P01) once, inside the invocation', async () => {
    const url = await freshDatabase(cluster);
    const { log } = captureLog();
    const handle = await openDatabase(url, log);
    const { org, tenantId } = await connectedOrganization(
      handle.db,
      await testBox(),
      sandbox,
      'Poisoned HD Co',
    );
    const id = await queuePush(handle.db, org.id, 'hyperdrive-poison');
    await handle.close();
    const mf = worker(url, sandboxEnv(sandbox));
    await readyz(mf);
    // The tick's claim waits on a held table lock; its backend is terminated, then the lock let go.
    await terminateWaitingClaim(cluster, url, () => runScheduled(mf));
    expect(await pushStatus(url, id)).toBe('pushed');
    expect(sandbox.state.statsSnapshot().invoicesCreated[tenantId]).toBe(1);
  });

  it('without the binding the isolate says its configuration failed, and keeps liveness', async () => {
    const mf = worker(undefined);
    expect(await readyz(mf)).toEqual({
      status: 503,
      body: { status: 'unavailable', checks: { boot: 'failed', database: 'not_checked' } },
    });
    expect((await mf.dispatchFetch('http://worker/livez')).status).toBe(200);
  });

  it('refuses to serve while the schema is behind the bundled migrations', async () => {
    const mf = worker(await freshDatabase(cluster));
    expect(await readyz(mf)).toEqual({
      status: 503,
      body: { status: 'unavailable', checks: { boot: 'failed', database: 'schema_behind' } },
    });
  });

  it('pushes a due invoice from scheduled() through the binding', async () => {
    const url = await freshDatabase(cluster);
    const { log } = captureLog();
    const handle = await openDatabase(url, log);
    const { org, tenantId } = await connectedOrganization(
      handle.db,
      await testBox(),
      sandbox,
      'Hyperdrive Co',
    );
    const id = await queuePush(handle.db, org.id, 'hyperdrive-1');
    await handle.close();
    const mf = worker(url, sandboxEnv(sandbox));
    await runScheduled(mf);
    const db = new pg.Client(url);
    await db.connect();
    const { rows } = await db.query('SELECT status FROM invoice_pushes WHERE id = $1', [id]);
    await db.end();
    expect(rows[0].status).toBe('pushed');
    expect(sandbox.state.statsSnapshot().invoicesCreated[tenantId]).toBe(1);
  });
  it('takes the uncached binding for every deciding read; only the app gauges of /metrics take the cached one', async () => {
    // HYPERDRIVE_UNCACHED leads to the database; HYPERDRIVE to a copy of it made before the invoices
    // arrive: a cache's view, stale. Whatever a path reads through HYPERDRIVE, it reads from the copy.
    const url = await freshDatabase(cluster);
    const { log } = captureLog();
    let handle = await openDatabase(url, log);
    const { org, connectionId } = await connectedOrganization(
      handle.db,
      await testBox(),
      sandbox,
      'Two Bindings Co',
      {
        accountCodes: null,
        chosen: 'none',
      },
    );
    await handle.close();
    const name = new URL(url).pathname.slice(1);
    await cluster.query(`CREATE DATABASE ${name}_cached TEMPLATE ${name}`);
    const cachedUrl = cluster.url(`${name}_cached`);
    // Only the database knows: the tenant chosen, and one invoice already waiting.
    handle = await openDatabase(url, log);
    await chooseConnection(handle.db, org.id, connectionId, true);
    await queuePush(handle.db, org.id, 'waiting-1');
    await handle.close();
    const lines: Record<string, unknown>[] = [];
    const mf = worker(url, { ...sandboxEnv(sandbox), ORG_MAX_PENDING_INVOICES: '2' }, (l) => lines.push(l), {
      HYPERDRIVE: cachedUrl,
      HYPERDRIVE_UNCACHED: url,
    });
    expect((await readyz(mf)).status).toBe(200);
    const post = (key: string) =>
      mf.dispatchFetch('http://worker/api/invoices', {
        method: 'POST',
        headers: {
          authorization: `Bearer ${org.apiKey}`,
          'content-type': 'application/json',
          'idempotency-key': key,
        },
        body: JSON.stringify({
          contact: { name: 'Acme' },
          date: '2026-12-01',
          currency: 'NZD',
          lineItems: [{ description: 'Widget', quantity: '1', unitAmount: '10.00' }],
        }),
      });
    const get = (path: string) =>
      mf.dispatchFetch(`http://worker${path}`, { headers: { authorization: `Bearer ${org.apiKey}` } });

    // The chosen tenant (the copy has none chosen).
    const created = await post('two-bindings-1');
    expect(created.status).toBe(202);
    const { id, status } = (await created.json()) as { id: string; status: string };
    expect(status).toBe('queued');
    // GET /api/invoices/{id} right after (the copy has no such invoice).
    expect((await get(`/api/invoices/${id}`)).status).toBe(200);
    // The idempotent replay (the copy has no such key).
    const replay = await post('two-bindings-1');
    expect(replay.status).toBe(200);
    expect(((await replay.json()) as { id: string }).id).toBe(id);
    // The quota: 2 pending in the database, none in the copy.
    const over = await post('two-bindings-2');
    expect(over.status).toBe(429);
    expect(((await over.json()) as { error: { code: string } }).error.code).toBe('quota_exceeded');
    // The probe writes through the uncached binding; the copy never sees a heartbeat.
    expect(await beats(url)).toBeGreaterThanOrEqual(1);
    expect(await beats(cachedUrl)).toBe(0);
    // The app's gauges (queue depth) read the copy: the one path that takes the cached binding. The
    // database holds 2 pushes (queued, or pushed by the run the POST started); the copy none.
    const metrics = await (await mf.dispatchFetch('http://worker/metrics')).text();
    const depth = [...metrics.matchAll(/^honest_health_queue_depth\{status="\w+"\} (\d+)$/gm)].map((m) =>
      Number(m[1]),
    );
    expect(depth.length).toBeGreaterThan(0);
    expect(depth.reduce((a, b) => a + b, 0)).toBe(0);
    expect(await query(url, 'SELECT count(*)::int AS n FROM invoice_pushes')).toEqual({ n: 2 });
    // Both bound: no warning about the cache.
    expect(lines.some((l) => String(l.msg).startsWith('HYPERDRIVE_UNCACHED is not bound'))).toBe(false);
    await cluster.query(`DROP DATABASE IF EXISTS ${name}_cached WITH (FORCE)`);
  });

  it('with HYPERDRIVE alone, everything goes through it, and the isolate warns that its caching must be off', async () => {
    const url = await migrated();
    const lines: Record<string, unknown>[] = [];
    const mf = worker(url, {}, (l) => lines.push(l));
    expect((await readyz(mf)).status).toBe(200);
    await until(
      async () => lines.find((l) => String(l.msg).startsWith('HYPERDRIVE_UNCACHED is not bound')),
      (line) => line !== undefined,
      5000,
    );
  });
});
