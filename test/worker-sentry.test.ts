import { Miniflare } from 'miniflare';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNeonProxy } from '../dev/neon-proxy/server.js';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { neonUrl, ownedDatabase } from './support/databases.js';
import type { Cluster } from './support/postgres.js';
import { type SentrySink, startSentrySink } from './support/sentry-sink.js';
import { TEST_TOKEN_KEY } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import { captureLog, openDatabase, type Sandbox, sandboxEnv } from './support/ticks.js';
import { until } from './support/until.js';
import { workerJsonLines } from './support/worker-log.js';
import { bundleModule, runScheduled, workerBundle, wranglerSettings } from './support/wrangler.js';

const ENTRY = 'test/support/worker-sentry-entry.ts';

let cluster: Cluster;
let sandbox: Sandbox;
let proxy: Awaited<ReturnType<typeof startNeonProxy>>;
let sentry: SentrySink;
let outdir: string;
let mf: Miniflare | undefined;

beforeAll(async () => {
  // wrangler.toml's settings, with this entry instead of its main.
  outdir = await workerBundle([ENTRY]);
  [cluster, sandbox, sentry] = await Promise.all([
    sharedCluster(),
    startXeroSandbox({ port: 0 }),
    startSentrySink(),
  ]);
  proxy = await startNeonProxy({ upstream: cluster.url() });
}, 180_000);
afterAll(async () => {
  await mf?.dispose();
  await Promise.allSettled([proxy?.close(), sandbox?.close(), sentry?.close()]);
  await cluster?.remove();
});

describe('the Worker with Sentry in its bundle', () => {
  it('a cron run that fails with 42501 sends its error and an error check-in to SENTRY_DSN; the run after the grant, ok', async () => {
    const db = await ownedDatabase(cluster, 'worker_sentry');
    await (await openDatabase(db.url, captureLog().log)).close();
    mf = new Miniflare({
      // Its console lines (the failed run is logged as an error) stay out of the test output.
      ...workerJsonLines(() => {}),
      ...bundleModule(outdir, 'worker-sentry-entry.js'),
      compatibilityDate: wranglerSettings.compatibility_date,
      compatibilityFlags: wranglerSettings.compatibility_flags,
      bindings: {
        DATABASE_URL: neonUrl(db.url),
        DATABASE_DRIVER: 'neon-http',
        NEON_LOCAL_PROXY: proxy.url,
        TOKEN_ENCRYPTION_KEY: TEST_TOKEN_KEY,
        SENTRY_DSN: sentry.dsn,
        LOG_LEVEL: 'warn',
        ...sandboxEnv(sandbox),
      },
    });
    const worker = mf;
    const scheduled = () => runScheduled(worker);
    const checkIns = () =>
      sentry.items
        .filter((i) => i.header.type === 'check_in' && i.payload.monitor_slug === 'push-invoices')
        .map((i) => i.payload.status);

    await scheduled();
    expect(
      await until(
        async () => checkIns(),
        (s) => s.length >= 2,
      ),
    ).toEqual(['in_progress', 'ok']);
    expect(sentry.items.filter((i) => i.header.type === 'event')).toEqual([]);

    await db.asSuperuser(`REVOKE UPDATE ON invoice_pushes FROM ${db.role}`);
    await scheduled();
    const event = await sentry.waitForEvent();
    expect(event.payload).toMatchObject({ tags: { tick: 'push-invoices' } });
    const reported = JSON.stringify(event.payload.exception);
    expect(reported).toContain('permission denied for table invoice_pushes');
    // No statement parameters, no connection string, no token key.
    expect(reported).not.toMatch(/params: (?!\[redacted\])/);
    expect(JSON.stringify(event.payload)).not.toContain(db.role);
    expect(JSON.stringify(event.payload)).not.toContain(TEST_TOKEN_KEY);
    expect(
      await until(
        async () => checkIns(),
        (s) => s.length >= 4,
      ),
    ).toEqual(['in_progress', 'ok', 'in_progress', 'error']);

    await db.asSuperuser(`GRANT UPDATE ON invoice_pushes TO ${db.role}`);
    await scheduled();
    expect(
      (
        await until(
          async () => checkIns(),
          (s) => s.length >= 6,
        )
      ).slice(4),
    ).toEqual(['in_progress', 'ok']);
  });
});
