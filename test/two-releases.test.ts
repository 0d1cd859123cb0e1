// Two releases on one schema, on every runtime (DESIGN.md §4): this build serves on a database that a
// newer release has migrated one expand ahead (Node, Bun and the Worker in workerd: ready, accepting and
// pushing), and refuses one whose contract removed a column it needs, naming the migration and column.
import { resolve } from 'node:path';
import { createLogger, loadConfig } from '@honest-health/platform';
import { type Migration, migrate } from '@honest-health/platform/db';
import { Miniflare } from 'miniflare';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNeonProxy } from '../dev/neon-proxy/server.js';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { openDriver } from '../src/app/databases.js';
import { latestMigrationAt, migrations } from '../src/app/migrations.gen.js';
import { freshDatabase, neonUrl } from './support/databases.js';
import { invoiceBody } from './support/orgs.js';
import type { Cluster } from './support/postgres.js';
import { repoRoot, type ServerProcess, spawnServer, TEST_TOKEN_KEY } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import {
  captureLog,
  connectedOrganization,
  openDatabase,
  type Sandbox,
  sandboxEnv,
  testBox,
} from './support/ticks.js';
import { until } from './support/until.js';
import { bundleModule, runScheduled, workerBundle, wranglerSettings } from './support/wrangler.js';

let cluster: Cluster;
let sandbox: Sandbox;
let proxy: Awaited<ReturnType<typeof startNeonProxy>>;
let outdir: string;
const servers: ServerProcess[] = [];
const workers: Miniflare[] = [];

beforeAll(async () => {
  outdir = await workerBundle();
  [cluster, sandbox] = await Promise.all([sharedCluster(), startXeroSandbox({ port: 0 })]);
  proxy = await startNeonProxy({ upstream: cluster.url() });
}, 180_000);
afterAll(async () => {
  await Promise.allSettled([...servers.map((s) => s.stop()), ...workers.map((w) => w.dispose())]);
  await proxy?.close();
  await sandbox?.close();
  await cluster?.remove();
});

// What the next release's `npm run db:generate` writes: a nullable column (expand), then, in the
// release after, the column this one writes dropped (contract).
const nextExpand: Migration = {
  tag: '0900_next_release_note',
  hash: 'next-expand',
  createdAt: latestMigrationAt + 1000,
  class: 'expand',
  statements: ['-- class: expand\nALTER TABLE "invoice_pushes" ADD COLUMN "next_release_note" text'],
};
const laterContract: Migration = {
  tag: '0901_drop_last_error',
  hash: 'later-contract',
  createdAt: latestMigrationAt + 2000,
  class: 'contract',
  removes: ['invoice_pushes.last_error'],
  statements: ['-- class: contract\nALTER TABLE "invoice_pushes" DROP COLUMN "last_error"'],
};

/** A database the newer releases migrated, with an organization connected to a sandbox tenant. */
async function newerDatabase(extra: Migration[]) {
  const url = await freshDatabase(cluster);
  const { log } = captureLog();
  const handle = await openDatabase(url, log);
  const { org } = await connectedOrganization(handle.db, await testBox(), sandbox, 'Two Releases Co');
  await handle.close();
  const driver = openDriver(
    loadConfig({ DATABASE_URL: url }),
    createLogger('error', {}, () => {}),
  );
  await driver.ready();
  const pool = driver.createPool('app');
  try {
    await migrate(pool, [...migrations, ...extra], log, { allowContract: true });
  } finally {
    await pool.end();
    await driver.close();
  }
  return { url, apiKey: org.apiKey };
}

async function pushStatuses(url: string): Promise<string[]> {
  const db = new pg.Client(url);
  await db.connect();
  try {
    return (
      await db.query<{ status: string }>('SELECT status FROM invoice_pushes ORDER BY created_at')
    ).rows.map((r) => r.status);
  } finally {
    await db.end();
  }
}

const post = (base: (path: string, init?: RequestInit) => Promise<Response>, apiKey: string, key: string) =>
  base('/api/invoices', {
    method: 'POST',
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      'idempotency-key': key,
    },
    body: JSON.stringify(invoiceBody()),
  });

const bun = resolve(repoRoot, 'node_modules/.bin/bun');
const processes = {
  node: (env: Record<string, string>) => spawnServer({ env }),
  bun: (env: Record<string, string>) =>
    spawnServer({ command: bun, args: [resolve(repoRoot, 'src/runtime/bun.ts')], env }),
};

describe.each(Object.entries(processes))('%s, one release behind the database', (runtime, start) => {
  it('serves on a schema one expand ahead: ready, accepts and pushes', async () => {
    const { url, apiKey } = await newerDatabase([nextExpand]);
    const server = await start({ DATABASE_URL: url, ...sandboxEnv(sandbox), TICK_INTERVAL_MS: '200' });
    servers.push(server);
    await server.waitForReady();
    expect(server.logs).toContainEqual(
      expect.objectContaining({
        msg: 'database schema ahead of this release',
        migrations: ['0900_next_release_note'],
      }),
    );
    expect((await server.get('/readyz')).status).toBe(200);
    const accepted = await post((p, i) => server.get(p, i), apiKey, `${runtime}-1`);
    expect(accepted.status).toBe(202);
    await until(
      () => pushStatuses(url),
      (s) => s[0] === 'pushed',
      20_000,
    );
    expect(server.logs.filter((l) => l.level === 'error')).toEqual([]);
  });

  it('refuses a schema whose contract removed a column it writes, naming both, without listening', async () => {
    const { url } = await newerDatabase([nextExpand, laterContract]);
    const server = await start({ DATABASE_URL: url });
    servers.push(server);
    expect(await server.exited).toBe(1);
    const failed = server.logs.find((l) => String(l.msg).startsWith('boot failed'));
    expect(String(failed?.msg)).toContain(
      'contract migration 0901_drop_last_error removed invoice_pushes.last_error, which this release needs',
    );
    expect(server.logs.some((l) => l.msg === 'listening')).toBe(false);
  });
});

describe('the Worker in workerd, one release behind the database', () => {
  const worker = (url: string) => {
    const mf = new Miniflare({
      ...bundleModule(outdir, 'worker.js'),
      compatibilityDate: wranglerSettings.compatibility_date,
      compatibilityFlags: wranglerSettings.compatibility_flags,
      bindings: {
        TOKEN_ENCRYPTION_KEY: TEST_TOKEN_KEY,
        NEON_LOCAL_PROXY: proxy.url,
        LOG_LEVEL: 'warn',
        DATABASE_URL: neonUrl(url),
        CF_VERSION_METADATA: { id: 'version-a', tag: '', timestamp: '2026-12-04T00:00:00Z' },
        ...sandboxEnv(sandbox),
      },
    });
    workers.push(mf);
    return mf;
  };

  it('serves on a schema one expand ahead: ready, accepts, pushes from its cron, records its version', async () => {
    const { url, apiKey } = await newerDatabase([nextExpand]);
    const mf = worker(url);
    const ready = await mf.dispatchFetch('http://worker/readyz');
    expect([ready.status, await ready.json()]).toEqual([
      200,
      { status: 'ok', checks: { boot: 'ok', database: 'ok' } },
    ]);
    const accepted = await post(
      (p, i) => mf.dispatchFetch(`http://worker${p}`, i as never) as never,
      apiKey,
      'w-1',
    );
    expect(accepted.status).toBe(202);
    // A loaded machine may take longer than the budget's 2 s between claim and send: the push is then
    // deferred, due at once, and goes out on a later cron.
    await runScheduled(mf);
    await until(
      async () => {
        const statuses = await pushStatuses(url);
        if (statuses[0] !== 'pushed') await runScheduled(mf);
        return statuses;
      },
      (s) => s[0] === 'pushed',
      20_000,
    );
    const db = new pg.Client(url);
    await db.connect();
    const releases = await db.query<{ release_id: string; runtime: string }>(
      'SELECT release_id, runtime FROM platform_releases',
    );
    await db.end();
    expect(releases.rows).toEqual([{ release_id: 'worker-version-a', runtime: 'workers' }]);
  });

  it('refuses a schema whose contract removed a column it writes, and /readyz?verbose names it', async () => {
    const { url } = await newerDatabase([nextExpand, laterContract]);
    const mf = worker(url);
    const res = await mf.dispatchFetch('http://worker/readyz?verbose');
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({
      status: 'unavailable',
      checks: { boot: 'failed', database: 'schema_contracted' },
      reason:
        'contract migration 0901_drop_last_error removed invoice_pushes.last_error, which this release needs: deploy a newer release',
    });
    expect((await mf.dispatchFetch('http://worker/api/invoices')).status).toBe(503);
  });
});
