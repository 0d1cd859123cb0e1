import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSecretBox, generateKeyBase64 } from '@honest-health/platform/crypto';
import { sql } from 'drizzle-orm';
import { Miniflare } from 'miniflare';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNeonProxy } from '../dev/neon-proxy/server.js';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { createOrganization } from '../src/app/organizations.js';
import { createEndpoint } from '../src/app/webhooks/endpoints.js';
import { freshDatabase, migratedDatabase, neonUrl, ownedDatabase } from './support/databases.js';
import { startHeartbeatSink } from './support/heartbeat-sink.js';
import { pushStatus, terminateWaitingClaim } from './support/poisoned-claim.js';
import { freePort } from './support/ports.js';
import type { Cluster } from './support/postgres.js';
import { startSentrySink } from './support/sentry-sink.js';
import { type ServerProcess, spawnServer, TEST_TOKEN_KEY } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
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

// The real Worker bundle (what `npm run build:worker` produces) in workerd via Miniflare, against a
// real Postgres through the local Neon proxy, and the Xero sandbox.

type NeonProxy = Awaited<ReturnType<typeof startNeonProxy>>;

let cluster: Cluster;
let sandbox: Sandbox;
let proxy: NeonProxy;
let outdir: string;
let errorsDir: string;
const started: Miniflare[] = [];

beforeAll(async () => {
  outdir = await workerBundle();
  // The errors Tail Worker, as `npm run deploy:workers:errors` builds it.
  errorsDir = await workerBundle(['-c', 'wrangler.errors.toml']);
  [cluster, sandbox] = await Promise.all([sharedCluster(), startXeroSandbox({ port: 0 })]);
  proxy = await startNeonProxy({ upstream: cluster.url() });
}, 180_000);
afterAll(async () => {
  await Promise.allSettled(started.map((mf) => mf.dispose()));
  await proxy?.close();
  await sandbox?.close();
  await cluster?.remove();
});

function worker(
  bindings: Record<string, string>,
  neonProxy: { url: string } = proxy,
  onLine?: (line: Record<string, unknown>) => void,
): Miniflare {
  const mf = new Miniflare({ ...workerJsonLines(onLine), ...appWorker(bindings, neonProxy) });
  started.push(mf);
  return mf;
}

function appWorker(bindings: Record<string, string>, neonProxy: { url: string } = proxy) {
  return {
    ...bundleModule(outdir, 'worker.js'),
    compatibilityDate: wranglerSettings.compatibility_date,
    compatibilityFlags: wranglerSettings.compatibility_flags,
    bindings: {
      TOKEN_ENCRYPTION_KEY: TEST_TOKEN_KEY,
      NEON_LOCAL_PROXY: neonProxy.url,
      LOG_LEVEL: 'warn',
      // Open, as a test scrapes without a token; the test below sees what happens without it.
      METRICS_PUBLIC: 'true',
      ...bindings,
    },
  } as const;
}

/**
 * The Worker with its errors Tail Worker, as wrangler.toml's commented tail_consumers deploys them:
 * the app Worker writes its reports as console lines (ERROR_REPORTS=tail), the Tail Worker sends them
 * to `sentryDsn` once each invocation ends.
 */
function workerWithErrorTail(bindings: Record<string, string>, sentryDsn: string): Miniflare {
  const mf = new Miniflare({
    workers: [
      { name: 'app', ...appWorker({ ERROR_REPORTS: 'tail', ...bindings }), tails: ['errors'] },
      {
        name: 'errors',
        ...bundleModule(errorsDir, 'worker-errors.js'),
        compatibilityDate: wranglerSettings.compatibility_date,
        compatibilityFlags: wranglerSettings.compatibility_flags,
        bindings: { SENTRY_DSN: sentryDsn },
      },
    ],
  });
  started.push(mf);
  return mf;
}

async function readyz(mf: Miniflare) {
  const res = await mf.dispatchFetch('http://worker/readyz');
  return {
    status: res.status,
    body: (await res.json()) as { status: string; checks: Record<string, string> },
  };
}

describe('the Worker in workerd', () => {
  it('answers liveness and readiness against a migrated database', async () => {
    const url = await migratedDatabase(cluster);
    const mf = worker({ DATABASE_URL: neonUrl(url) });
    const live = await mf.dispatchFetch('http://worker/livez');
    expect(live.status).toBe(200);
    expect(await live.json()).toEqual({ status: 'ok' });
    expect(await readyz(mf)).toEqual({
      status: 200,
      body: { status: 'ok', checks: { boot: 'ok', database: 'ok' } },
    });
  });

  it('answers the wrong method on probe and scrape routes with 405 and Allow, booted or not', async () => {
    const url = await migratedDatabase(cluster);
    const booted = worker({ DATABASE_URL: neonUrl(url) });
    // Not migrated: the isolate's boot fails, which must not turn a method error into a 503.
    const failed = worker({ DATABASE_URL: neonUrl(await freshDatabase(cluster)) });
    for (const [mf, paths] of [
      [booted, ['/livez', '/health', '/healthz', '/readyz', '/metrics']],
      [failed, ['/livez', '/health', '/healthz']],
    ] as const) {
      for (const path of paths) {
        const res = await mf.dispatchFetch(`http://worker${path}`, { method: 'POST', body: '{}' });
        expect(res.status, path).toBe(405);
        expect(res.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
        expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
        expect(await res.json()).toEqual({
          error: { code: 'method_not_allowed', message: 'use GET, HEAD or OPTIONS' },
        });
      }
    }
    expect((await booted.dispatchFetch('http://worker/livez', { method: 'HEAD' })).status).toBe(200);
    expect((await failed.dispatchFetch('http://worker/livez', { method: 'OPTIONS' })).status).toBe(200);
    expect((await failed.dispatchFetch('http://worker/livez', { method: 'HEAD' })).status).toBe(200);
    expect((await booted.dispatchFetch('http://worker/readyz', { method: 'OPTIONS' })).status).toBe(200);
    expect((await failed.dispatchFetch('http://worker/readyz', { method: 'OPTIONS' })).status).toBe(503);
  });

  it('serves no /metrics or /healthz/ticks without METRICS_TOKEN (or METRICS_PUBLIC), and says so', async () => {
    const url = await migratedDatabase(cluster);
    const lines: Record<string, unknown>[] = [];
    const mf = worker({ DATABASE_URL: neonUrl(url), METRICS_PUBLIC: '' }, proxy, (line) => lines.push(line));
    expect((await readyz(mf)).status).toBe(200);
    for (const path of ['/metrics', '/healthz/ticks']) {
      const res = await mf.dispatchFetch(`http://worker${path}`);
      expect(res.status, path).toBe(404);
      expect(await res.json()).toEqual({ error: { code: 'not_found', message: 'no such route' } });
    }
    await until(
      async () => lines.filter((l) => String(l.msg).startsWith('/metrics and /healthz/ticks are off')),
      (found) => found.length > 0,
      5000,
    );
    const guarded = worker({
      DATABASE_URL: neonUrl(url),
      METRICS_PUBLIC: '',
      METRICS_TOKEN: 'worker-token-7f3e',
    });
    expect((await guarded.dispatchFetch('http://worker/metrics')).status).toBe(401);
    const scraped = await guarded.dispatchFetch('http://worker/metrics', {
      headers: { authorization: 'Bearer worker-token-7f3e' },
    });
    expect(scraped.status).toBe(200);
  });

  it('reports read_only when the database only takes reads', async () => {
    const url = await migratedDatabase(cluster);
    await cluster.query(
      `ALTER DATABASE ${new URL(url).pathname.slice(1)} SET default_transaction_read_only = on`,
    );
    const mf = worker({ DATABASE_URL: neonUrl(url) });
    const res = await mf.dispatchFetch('http://worker/readyz?verbose');
    expect(res.status).toBe(503);
    expect(((await res.json()) as { checks: unknown }).checks).toEqual({ boot: 'ok', database: 'read_only' });
  });

  it('reports unreachable when the database cannot be reached, and keeps liveness', async () => {
    const url = await migratedDatabase(cluster);
    const ownProxy = await startNeonProxy({ upstream: cluster.url() });
    const mf = worker({ DATABASE_URL: neonUrl(url) }, ownProxy);
    expect((await readyz(mf)).status).toBe(200);
    await ownProxy.close();
    const down = await readyz(mf);
    expect(down).toEqual({
      status: 503,
      body: { status: 'unavailable', checks: { boot: 'ok', database: 'unreachable' } },
    });
    expect((await mf.dispatchFetch('http://worker/livez')).status).toBe(200);
  });

  it('refuses to serve when the schema is behind the bundled migrations', async () => {
    const url = await freshDatabase(cluster);
    const mf = worker({ DATABASE_URL: neonUrl(url) });
    const ready = await readyz(mf);
    expect(ready.status).toBe(503);
    expect(ready.body.checks.boot).toBe('failed');
    const api = await mf.dispatchFetch('http://worker/api/invoices');
    expect(api.status).toBe(503);
    expect(api.headers.get('retry-after')).toMatch(/^\d+$/);
    expect((await mf.dispatchFetch('http://worker/livez')).status).toBe(200);
  });

  // Readiness follows the boot's retries: it says why the last one failed, and turns ready with the one
  // that succeeds.
  it('says the schema is behind until db:migrate runs, then turns ready without a restart', async () => {
    const url = await freshDatabase(cluster);
    const mf = worker({ DATABASE_URL: neonUrl(url) });
    expect(await readyz(mf)).toEqual({
      status: 503,
      body: { status: 'unavailable', checks: { boot: 'failed', database: 'schema_behind' } },
    });
    const { log } = captureLog();
    await (await openDatabase(url, log)).close();
    // The first retry waits out a 1 s back-off.
    const ready = await until(
      () => readyz(mf),
      (r) => r.status === 200,
      15_000,
    );
    expect(ready.body).toEqual({ status: 'ok', checks: { boot: 'ok', database: 'ok' } });
    expect((await mf.dispatchFetch('http://worker/api/invoices')).status).toBe(401);
  });

  it('started before its database proxy: unreachable, then ready once the proxy is up', async () => {
    const url = await migratedDatabase(cluster);
    const port = await freePort();
    const mf = worker({ DATABASE_URL: neonUrl(url) }, { url: `http://127.0.0.1:${port}` });
    expect(await readyz(mf)).toEqual({
      status: 503,
      body: { status: 'unavailable', checks: { boot: 'failed', database: 'unreachable' } },
    });
    const late = await startNeonProxy({ upstream: cluster.url(), port });
    try {
      const ready = await until(
        () => readyz(mf),
        (r) => r.status === 200,
        20_000,
      );
      expect(ready.body.checks).toEqual({ boot: 'ok', database: 'ok' });
    } finally {
      await mf.dispose();
      started.splice(started.indexOf(mf), 1);
      await late.close();
    }
  });

  it('boots an isolate once for 20 concurrent first requests', async () => {
    const url = await migratedDatabase(cluster);
    const lines: Record<string, unknown>[] = [];
    const mf = worker({ DATABASE_URL: neonUrl(url), LOG_LEVEL: 'info' }, proxy, (line) => lines.push(line));
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => mf.dispatchFetch('http://worker/readyz').then((r) => r.status)),
    );
    expect(answers).toEqual(Array(20).fill(200));
    await until(
      async () => lines.filter((l) => l.msg === 'isolate booted').length,
      (n) => n > 0,
      5000,
    );
    expect(lines.filter((l) => String(l.msg).startsWith('isolate boot')).map((l) => l.msg)).toEqual([
      'isolate booted',
    ]);
  });

  it('pushes a due invoice from scheduled()', async () => {
    const url = await migratedDatabase(cluster);
    const { log } = captureLog();
    const handle = await openDatabase(url, log);
    const { org, tenantId } = await connectedOrganization(handle.db, await testBox(), sandbox, 'Cron Co');
    const id = await queuePush(handle.db, org.id, 'cron-1');
    await handle.close();
    const mf = worker({ DATABASE_URL: neonUrl(url), ...sandboxEnv(sandbox) });
    await runScheduled(mf);
    const db = new pg.Client(url);
    await db.connect();
    const { rows } = await db.query('SELECT status, xero_invoice_id FROM invoice_pushes WHERE id = $1', [id]);
    await db.end();
    expect(rows[0].status).toBe('pushed');
    expect(sandbox.state.statsSnapshot().invoicesCreated[tenantId]).toBe(1);
  });

  it('delivers webhooks from scheduled(): the push it makes, signed, to a receiver on 127.0.0.1', async () => {
    const url = await migratedDatabase(cluster);
    const { log } = captureLog();
    const handle = await openDatabase(url, log);
    const box = await testBox();
    const { org } = await connectedOrganization(handle.db, box, sandbox, 'Cron Hooks Co');
    const received: { headers: Record<string, string>; body: string }[] = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => {
        body += c;
      });
      req.on('end', () => {
        received.push({ headers: req.headers as Record<string, string>, body });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { port } = server.address() as AddressInfo;
      const endpoint = await createEndpoint(handle.db, box, org.id, `http://127.0.0.1:${port}/hook`);
      const id = await queuePush(handle.db, org.id, 'cron-hook-1');
      const mf = worker({
        DATABASE_URL: neonUrl(url),
        WEBHOOK_ALLOW_INSECURE: 'true',
        ...sandboxEnv(sandbox),
      });
      // The push tick runs before the delivery tick in one invocation: the event goes out in the same one.
      // A loaded machine may defer the push past the budget's 2 s from its claim: a later cron sends it.
      const status = async () =>
        (await handle.pool.query<{ status: string }>('SELECT status FROM invoice_pushes WHERE id = $1', [id]))
          .rows[0]?.status;
      for (let cron = 0; cron < 5; cron++) {
        await runScheduled(mf);
        if ((await status()) === 'pushed') break;
        expect(received).toHaveLength(0);
      }
      expect(await status()).toBe('pushed');
      expect(received).toHaveLength(1);
      const event = new Webhook(endpoint.secret).verify(received[0]?.body ?? '', received[0]?.headers ?? {});
      expect(event).toMatchObject({ type: 'invoice.pushed', data: { id, status: 'pushed' } });
    } finally {
      server.close();
      await handle.close();
    }
  });

  it('runs the connect flow: a one-time link, its cookie, PKCE, the callback', async () => {
    const url = await migratedDatabase(cluster);
    const { log } = captureLog();
    const handle = await openDatabase(url, log);
    const org = await createOrganization(handle.db, 'Worker Connect Co');
    await handle.close();
    const mf = worker({
      DATABASE_URL: neonUrl(url),
      ...sandboxEnv(sandbox),
      XERO_REDIRECT_URI: 'https://worker.example/connect/xero/callback',
    });
    const minted = await mf.dispatchFetch('https://worker.example/api/connect-links', {
      method: 'POST',
      headers: { authorization: `Bearer ${org.apiKey}` },
    });
    expect(minted.status).toBe(201);
    const { url: link } = (await minted.json()) as { url: string };
    // Opening the link shows a confirm page and spends nothing; its button POSTs to the same address.
    const page = await mf.dispatchFetch(link, { redirect: 'manual' });
    expect(page.status).toBe(200);
    expect(page.headers.get('set-cookie')).toBeNull();
    const start = await mf.dispatchFetch(link, { method: 'POST', redirect: 'manual' });
    expect(start.status).toBe(303);
    const setCookie = start.headers.get('set-cookie') ?? '';
    // https: the cookie is Secure too.
    expect(setCookie).toMatch(
      /^xero_connect=[A-Za-z0-9_-]{43}; Max-Age=600; Path=\/connect\/xero; HttpOnly; Secure; SameSite=Lax$/,
    );
    const toXero = new URL(start.headers.get('location') ?? '');
    expect(toXero.searchParams.get('code_challenge_method')).toBe('S256');
    const tenantId = sandbox.state.createTenant({ name: 'Worker Books' }).id;
    sandbox.state.authorizePlans.push({ deny: false, tenantIds: [tenantId], grantScope: null });
    const approved = await fetch(toXero, { redirect: 'manual' });
    const callback = approved.headers.get('location') ?? '';
    const cookie = setCookie.split(';')[0] ?? '';
    const stranger = await mf.dispatchFetch(callback, { headers: { accept: 'application/json' } });
    expect(stranger.status).toBe(400);
    const done = await mf.dispatchFetch(callback, { headers: { cookie, accept: 'application/json' } });
    expect(done.status).toBe(200);
    expect(await done.json()).toMatchObject({
      organization: { id: org.id, name: 'Worker Connect Co' },
      connected: [{ tenantId, tenantName: 'Worker Books' }],
      confirmation: { required: true },
    });
  });

  it('scheduled() after a key rotation: opens the previous key, refreshes under the new one, and pushes', async () => {
    const url = await migratedDatabase(cluster);
    const { log } = captureLog();
    const handle = await openDatabase(url, log);
    // Sealed under the key the Worker had before (TEST_TOKEN_KEY), and due for a refresh.
    const { org, tenantId, grantId } = await connectedOrganization(
      handle.db,
      await testBox(),
      sandbox,
      'Rotated Co',
    );
    await handle.db.execute(
      sql`UPDATE xero_grants SET access_expires_at = now() + interval '5 minutes' WHERE id = ${grantId}`,
    );
    const id = await queuePush(handle.db, org.id, 'rotated-1');
    await handle.close();
    const NEW = generateKeyBase64();
    const mf = worker({
      DATABASE_URL: neonUrl(url),
      TOKEN_ENCRYPTION_KEY: NEW,
      TOKEN_ENCRYPTION_KEYS_PREVIOUS: TEST_TOKEN_KEY,
      ...sandboxEnv(sandbox),
    });
    await runScheduled(mf);
    const db = new pg.Client(url);
    await db.connect();
    const push = await db.query('SELECT status FROM invoice_pushes WHERE id = $1', [id]);
    const grant = await db.query(
      'SELECT token_version, refresh_token_enc, refresh_error FROM xero_grants WHERE id = $1',
      [grantId],
    );
    await db.end();
    expect(push.rows[0].status).toBe('pushed');
    expect(sandbox.state.statsSnapshot().invoicesCreated[tenantId]).toBe(1);
    const kid = (await createSecretBox(NEW)).keyId;
    expect(grant.rows[0]).toMatchObject({ token_version: 2, refresh_error: null });
    expect(grant.rows[0].refresh_token_enc.startsWith(`k1.${kid}.`)).toBe(true);
  });

  it("after a lost answer and Xero's six minutes, scheduled() finds the invoice by its marker", async () => {
    const url = await migratedDatabase(cluster);
    const { log } = captureLog();
    const handle = await openDatabase(url, log);
    const { org, tenantId } = await connectedOrganization(
      handle.db,
      await testBox(),
      sandbox,
      'Late Cron Co',
    );
    const id = await queuePush(handle.db, org.id, 'late-cron-1');
    await handle.close();
    const mf = worker({ DATABASE_URL: neonUrl(url), ...sandboxEnv(sandbox) });
    const db = new pg.Client(url);
    await db.connect();
    try {
      const row = async () =>
        (await db.query('SELECT * FROM invoice_pushes WHERE id = $1', [id])).rows[0] as Record<
          string,
          unknown
        >;
      sandbox.state.faults.add({ target: 'invoices', kind: 'drop', count: 1 });
      await runScheduled(mf);
      expect(await row()).toMatchObject({ status: 'failed', xero_in_doubt: true });
      // Seven minutes pass on both sides: Xero has forgotten the key.
      sandbox.state.clock.advance(7 * 60_000);
      await db.query(
        `UPDATE invoice_pushes SET xero_key_sent_at = xero_key_sent_at - interval '7 minutes', next_attempt_at = now() WHERE id = $1`,
        [id],
      );
      await runScheduled(mf);
      const invoices = [...(sandbox.state.tenants.get(tenantId)?.invoices.values() ?? [])];
      expect(invoices).toHaveLength(1);
      expect(await row()).toMatchObject({ status: 'pushed', xero_invoice_id: invoices[0]?.InvoiceID });
      expect(invoices[0]?.Url).toBe((await row()).xero_marker);
    } finally {
      await db.end();
    }
  });

  it("scheduled() and two server processes share one tenant's budget: its minute's 60, at most 5 in flight", async () => {
    const url = await migratedDatabase(cluster);
    const { log } = captureLog();
    const handle = await openDatabase(url, log);
    const { org, tenantId } = await connectedOrganization(
      handle.db,
      await testBox(),
      sandbox,
      'Shared Budget Co',
    );
    for (let i = 0; i < 70; i++) await queuePush(handle.db, org.id, `shared-${i}`);
    await handle.close();
    const count = async (where: string) => {
      const db = new pg.Client(url);
      await db.connect();
      try {
        return (await db.query(`SELECT count(*)::int AS n FROM invoice_pushes WHERE ${where}`)).rows[0]
          .n as number;
      } finally {
        await db.end();
      }
    };
    // Calls that last a while, so slots really fill (the sandbox answers 429 to a sixth in flight).
    const latencyBefore = sandbox.state.limiter.limits.latencyMs;
    sandbox.state.setLimits({ latencyMs: 20 });
    const before = sandbox.state.statsSnapshot().rateLimited;
    const mf = worker({ DATABASE_URL: neonUrl(url), ...sandboxEnv(sandbox) });
    const servers: ServerProcess[] = [];
    let stop = false;
    try {
      // The isolate goes first (so it surely takes part): one invocation, the tenant's 5 slots.
      await runScheduled(mf);
      expect(await count(`status = 'pushed'`)).toBe(5);
      const env = { DATABASE_URL: url, TOKEN_ENCRYPTION_KEY: TEST_TOKEN_KEY, ...sandboxEnv(sandbox) };
      servers.push(
        ...(await Promise.all(
          [0, 1].map(() => spawnServer({ env: { ...env, TICK_INTERVAL_MS: '100', PUSH_BATCH_SIZE: '100' } })),
        )),
      );
      const crons = (async () => {
        while (!stop) await runScheduled(mf);
      })();
      await until(
        () => count(`status = 'pushed'`),
        (n) => n >= 60,
        30_000,
        100,
      );
      // Xero's real minute: the 60 are its allowance, and nobody sends the 61st within it.
      await new Promise((r) => setTimeout(r, 1500));
      stop = true;
      await crons;
      expect(await count(`status = 'pushed'`)).toBe(60);
      expect(await count(`status = 'queued' AND attempts = 0`)).toBe(10);
      expect(sandbox.state.statsSnapshot().rateLimited).toBe(before);
      expect(sandbox.state.statsSnapshot().invoicesCreated[tenantId]).toBe(60);
    } finally {
      stop = true;
      sandbox.state.setLimits({ latencyMs: latencyBefore });
      await Promise.all(servers.map((s) => s.stop()));
    }
  });

  it('disposes and retries a poisoned tick once inside the same invocation', async () => {
    const url = await migratedDatabase(cluster);
    const { log } = captureLog();
    const handle = await openDatabase(url, log);
    const { org, tenantId } = await connectedOrganization(
      handle.db,
      await testBox(),
      sandbox,
      'Poisoned Cron Co',
    );
    const id = await queuePush(handle.db, org.id, 'cron-poison');
    await handle.close();
    const mf = worker({ DATABASE_URL: neonUrl(url), ...sandboxEnv(sandbox) });
    await readyz(mf); // boot the isolate first, so the next connection to wait on the lock is the tick's

    // Hold the queue's table so the tick's claim waits; then kill the waiting backend (57P01, a
    // poison error) and let go. Only a dispose-and-retry inside the invocation can still push it.
    await terminateWaitingClaim(cluster, url, () => runScheduled(mf));
    expect(await pushStatus(url, id)).toBe('pushed');
    expect(sandbox.state.statsSnapshot().invoicesCreated[tenantId]).toBe(1);
  });

  it('tick health: scheduled() records runs and checks in with its crontab; a cron that stops firing turns overdue', async () => {
    const url = await migratedDatabase(cluster);
    const [sentry, heartbeats] = await Promise.all([startSentrySink(), startHeartbeatSink()]);
    try {
      const interval = 1000;
      const mf = workerWithErrorTail(
        {
          DATABASE_URL: neonUrl(url),
          ...sandboxEnv(sandbox),
          TICK_INTERVAL_MS: String(interval),
          TICK_HEARTBEAT_URL_PUSH_INVOICES: heartbeats.urlFor('push'),
        },
        sentry.dsn,
      );
      // No cron has fired yet, and an isolate has no start to wait from: overdue at once.
      const before = await tickHealth(mf);
      expect(before.status).toBe(503);
      expect(before.body.ticks['push-invoices']).toMatchObject({ status: 'overdue', overdue: true });

      await runScheduled(mf);
      const after = await tickHealth(mf);
      expect(after.status).toBe(200);
      for (const tick of ['push-invoices', 'refresh-tokens']) {
        expect(after.body.ticks[tick]).toMatchObject({
          status: 'ok',
          overdue: false,
          consecutive_failures: 0,
        });
        // Every invocation, in whichever isolate, writes the same row: the cron is the instance.
        expect(after.body.ticks[tick]?.instances.map((i) => i.instance)).toEqual(['worker']);
      }
      const metrics = await (await mf.dispatchFetch('http://worker/metrics')).text();
      expect(metrics).toMatch(
        /^honest_health_tick_last_success_timestamp_seconds\{tick="push-invoices"\} \d/m,
      );
      expect(metrics).toMatch(/^honest_health_tick_consecutive_failures\{tick="push-invoices"\} 0$/m);

      // The Tail Worker sends the invocation's check-ins once it ends: in_progress then ok, on the
      // trigger's crontab.
      const checkInsOf = () =>
        sentry.items.filter(
          (i) => i.header.type === 'check_in' && i.payload.monitor_slug === 'push-invoices',
        );
      const pushCheckIns = await until(
        async () => checkInsOf(),
        (items) => items.length >= 2,
      );
      expect(pushCheckIns.map((i) => i.payload.status)).toEqual(['in_progress', 'ok']);
      expect(pushCheckIns[1]?.payload).toMatchObject({
        check_in_id: pushCheckIns[0]?.payload.check_in_id,
        monitor_config: {
          schedule: { type: 'crontab', value: '* * * * *' },
          checkin_margin: expect.any(Number),
        },
      });
      expect(heartbeats.pings.map((p) => p.signal)).toEqual(['start', 'success']);

      // The cron stops firing: after K (3) intervals without a scheduled() call, both ticks are overdue.
      const stoppedAt = Date.now();
      const overdue = await until(
        () => tickHealth(mf),
        // Refresh runs first in an invocation, so it turns overdue a few milliseconds before push.
        (h) => h.status === 503 && Object.values(h.body.ticks).every((t) => t.overdue),
        10 * interval,
        100,
      );
      expect(Date.now() - stoppedAt).toBeGreaterThanOrEqual(2 * interval);
      for (const tick of ['push-invoices', 'refresh-tokens']) {
        expect(overdue.body.ticks[tick]).toMatchObject({
          status: 'overdue',
          overdue: true,
          consecutive_failures: 0,
        });
      }
    } finally {
      await Promise.allSettled([sentry.close(), heartbeats.close()]);
    }
  });

  it('tick health: the app role loses UPDATE on invoice_pushes, every cron run fails with 42501: failing, error check-ins, /fail; grant back: ok', async () => {
    const owned = await ownedDatabase(cluster, 'worker_ticks');
    const { url, role, asSuperuser } = owned;
    const { log } = captureLog();
    await (await openDatabase(url, log)).close();
    const [sentry, heartbeats] = await Promise.all([startSentrySink(), startHeartbeatSink()]);
    try {
      // Over Neon's HTTP driver throughout: no sessions, so every tick health record is one statement.
      const mf = workerWithErrorTail(
        {
          DATABASE_URL: neonUrl(url),
          DATABASE_DRIVER: 'neon-http',
          ...sandboxEnv(sandbox),
          TICK_HEARTBEAT_URL_PUSH_INVOICES: heartbeats.urlFor('push'),
        },
        sentry.dsn,
      );
      await runScheduled(mf);
      expect((await tickHealth(mf)).status).toBe(200);

      await asSuperuser(`REVOKE UPDATE ON invoice_pushes FROM ${role}`);
      await runScheduled(mf);
      await runScheduled(mf);
      const failing = await tickHealth(mf);
      expect(failing.status).toBe(503);
      expect(failing.body.ticks['push-invoices']).toMatchObject({
        status: 'failing',
        last_error_code: '42501',
        failing_instances: ['worker'],
      });
      expect(failing.body.ticks['refresh-tokens']?.status).toBe('ok');
      expect((await readyz(mf)).status).toBe(200);
      const statuses = await until(
        async () =>
          sentry.items
            .filter((i) => i.header.type === 'check_in' && i.payload.monitor_slug === 'push-invoices')
            .map((i) => i.payload.status),
        (s) => s.length >= 6,
      );
      expect(statuses).toEqual(['in_progress', 'ok', 'in_progress', 'error', 'in_progress', 'error']);
      // Each failed run's error went the same way, with its tick's tag, its cause, and no parameters.
      const events = sentry.items.filter((i) => i.header.type === 'event');
      expect(events.length).toBeGreaterThanOrEqual(2);
      expect(events[0]?.payload).toMatchObject({ tags: { tick: 'push-invoices' } });
      const reported = JSON.stringify(events[0]?.payload.exception);
      expect(reported).toContain('permission denied for table invoice_pushes');
      expect(reported).not.toMatch(/params: (?!\[redacted\])/);
      expect(heartbeats.pings.map((p) => p.signal)).toEqual([
        'start',
        'success',
        'start',
        'fail',
        'start',
        'fail',
      ]);

      await asSuperuser(`GRANT UPDATE ON invoice_pushes TO ${role}`);
      await runScheduled(mf);
      const recovered = await tickHealth(mf);
      expect(recovered.status).toBe(200);
      expect(recovered.body.ticks['push-invoices']).toMatchObject({ status: 'ok', consecutive_failures: 0 });
      expect(heartbeats.pings.at(-1)?.signal).toBe('success');
    } finally {
      await Promise.allSettled([sentry.close(), heartbeats.close()]);
    }
  });
});

async function tickHealth(mf: Miniflare) {
  const res = await mf.dispatchFetch('http://worker/healthz/ticks');
  return {
    status: res.status,
    body: (await res.json()) as {
      status: string;
      ticks: Record<
        string,
        {
          status: string;
          overdue: boolean;
          consecutive_failures: number;
          last_error_code: string | null;
          failing_instances: string[];
          instances: { instance: string }[];
        }
      >;
    },
  };
}
