import type { Miniflare } from 'miniflare';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  neonUrl,
  readWorkerBundle,
  startMiniflare,
  type WorkerBundle,
} from '../bench/support/worker-bundle.js';
import { startNeonProxy } from '../dev/neon-proxy/server.js';
import { createOrganization } from '../src/app/organizations.js';
import { migratedDatabase } from './support/databases.js';
import type { Cluster } from './support/postgres.js';
import { parsePrometheus, sample } from './support/prometheus.js';
import { TEST_TOKEN_KEY } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import { captureLog, openDatabase, queuePush } from './support/ticks.js';
import { workerBundle } from './support/wrangler.js';

// The Worker bundle in workerd: request ids on every answer (its own early ones included), and a
// /metrics that serves what means something without a long-lived process: the database's status from
// a probe run for the scrape, and the push queue's depth, both read from the database.

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TOKEN = 'metrics-test-token-0c1d';

let bundle: WorkerBundle;
let cluster: Cluster;
let proxy: Awaited<ReturnType<typeof startNeonProxy>>;
let mf: Miniflare | undefined;
beforeAll(async () => {
  bundle = readWorkerBundle(await workerBundle());
  cluster = sharedCluster();
  proxy = await startNeonProxy({ upstream: cluster.url() });
}, 180_000);
afterAll(async () => {
  await mf?.dispose();
  await proxy?.close();
  await cluster?.remove();
});

describe('observability on Workers', () => {
  it('echoes request ids and serves the database gauges on /metrics behind the token', async () => {
    const url = await migratedDatabase(cluster);
    const { log } = captureLog();
    const handle = await openDatabase(url, log);
    const org = await createOrganization(handle.db, 'Edge Ltd');
    for (const key of ['edge-1', 'edge-2']) await queuePush(handle.db, org.id, key);
    await handle.close();
    mf = startMiniflare(bundle, {
      DATABASE_URL: neonUrl(url),
      NEON_LOCAL_PROXY: proxy.url,
      TOKEN_ENCRYPTION_KEY: TEST_TOKEN_KEY,
      METRICS_TOKEN: TOKEN,
      LOG_LEVEL: 'warn',
    });

    const live = await mf.dispatchFetch('http://worker/livez', { headers: { 'x-request-id': 'edge-req-1' } });
    expect(live.status).toBe(200);
    expect(live.headers.get('x-request-id')).toBeNull();
    const ready = await mf.dispatchFetch('http://worker/readyz', {
      headers: { 'x-request-id': 'edge-req-2' },
    });
    expect(ready.status).toBe(200);
    expect(ready.headers.get('x-request-id')).toBe('edge-req-2');
    expect((await mf.dispatchFetch('http://worker/readyz')).headers.get('x-request-id')).toMatch(UUID);

    expect((await mf.dispatchFetch('http://worker/metrics')).status).toBe(401);
    const res = await mf.dispatchFetch('http://worker/metrics', {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const families = parsePrometheus(await res.text());
    expect(sample(families, 'honest_health_database_status', { status: 'ok' })).toBe(1);
    expect(sample(families, 'honest_health_database_probe_latency_seconds')).toBeGreaterThan(0);
    expect(sample(families, 'honest_health_queue_depth', { status: 'awaiting_connection' })).toBe(2);
    expect(sample(families, 'honest_health_queue_depth', { status: 'queued' })).toBe(0);
    // Per-isolate counters would mislead (many short-lived isolates): Workers do not serve them.
    expect(sample(families, 'honest_health_database_probe_age_seconds')).toBeLessThanOrEqual(1);
    expect(families.map((f) => f.name).sort()).toEqual([
      'honest_health_database_probe_age_seconds',
      'honest_health_database_probe_latency_seconds',
      'honest_health_database_status',
      'honest_health_queue_depth',
      // The ticks that run without Xero (the sweep, webhook deliveries), read from the shared table.
      'honest_health_tick_consecutive_failures',
      'honest_health_tick_healthy',
      'honest_health_tick_last_success_timestamp_seconds',
    ]);
  });
});
