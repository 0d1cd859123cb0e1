import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Miniflare } from 'miniflare';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNeonProxy } from '../tools/neon-proxy/server.js';
import { startXeroSandbox } from '../tools/xero-sandbox/server.js';
import { freshDatabase } from './support/databases.js';
import { type Cluster, startCluster } from './support/postgres.js';
import { repoRoot, TEST_TOKEN_KEY } from './support/server.js';
import {
  captureLog,
  connectedOrganization,
  openDatabase,
  queuePush,
  type Sandbox,
  testBox,
} from './support/ticks.js';
import { until } from './support/until.js';

// The real Worker bundle (what `npm run build:worker` produces) in workerd via Miniflare, against a
// real Postgres through the local Neon proxy, and the Xero sandbox.

type NeonProxy = Awaited<ReturnType<typeof startNeonProxy>>;

let cluster: Cluster;
let sandbox: Sandbox;
let proxy: NeonProxy;
let outdir: string;
const started: Miniflare[] = [];

beforeAll(async () => {
  outdir = mkdtempSync(join(tmpdir(), 'worker-bundle-'));
  execFileSync('npx', ['wrangler', 'deploy', '--dry-run', '--outdir', outdir], {
    cwd: repoRoot,
    env: { ...process.env, XDG_CONFIG_HOME: join(outdir, 'config'), WRANGLER_SEND_METRICS: 'false' },
    stdio: 'pipe',
  });
  [cluster, sandbox] = await Promise.all([startCluster(), startXeroSandbox({ port: 0 })]);
  proxy = await startNeonProxy({ upstream: cluster.url() });
}, 180_000);
afterAll(async () => {
  await Promise.allSettled(started.map((mf) => mf.dispose()));
  await proxy?.close();
  await sandbox?.close();
  await cluster?.remove();
  rmSync(outdir, { recursive: true, force: true });
});

function worker(bindings: Record<string, string>, neonProxy: { url: string } = proxy): Miniflare {
  const mf = new Miniflare({
    modules: true,
    scriptPath: join(outdir, 'worker.js'),
    modulesRoot: outdir,
    compatibilityDate: '2026-04-26',
    compatibilityFlags: ['nodejs_compat'],
    bindings: {
      TOKEN_ENCRYPTION_KEY: TEST_TOKEN_KEY,
      NEON_LOCAL_PROXY: neonProxy.url,
      LOG_LEVEL: 'warn',
      ...bindings,
    },
  });
  started.push(mf);
  return mf;
}

/** A database reached through the Neon proxy: the host in the URL is ignored by the proxy. */
const neonUrl = (url: string) => {
  const u = new URL(url);
  u.host = 'db.neon.invalid';
  return u.toString();
};

async function readyz(mf: Miniflare) {
  const res = await mf.dispatchFetch('http://worker/readyz');
  return { status: res.status, body: (await res.json()) as { status: string; checks: Record<string, string> } };
}

describe('the Worker in workerd', () => {
  it('answers liveness and readiness against a migrated database', async () => {
    const url = await freshDatabase(cluster);
    const { log } = captureLog();
    await (await openDatabase(url, log)).close();
    const mf = worker({ DATABASE_URL: neonUrl(url) });
    const live = await mf.dispatchFetch('http://worker/livez');
    expect(live.status).toBe(200);
    expect(await live.json()).toEqual({ status: 'ok' });
    expect(await readyz(mf)).toEqual({ status: 200, body: { status: 'ok', checks: { boot: 'ok', database: 'ok' } } });
  });
});
