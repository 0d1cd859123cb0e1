import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { migratedDatabase } from './support/databases.js';
import { createOrg, waitForKey } from './support/orgs.js';
import type { Cluster } from './support/postgres.js';
import { type SentrySink, startSentrySink } from './support/sentry-sink.js';
import { spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import type { Sandbox } from './support/ticks.js';
import { sandboxEnv } from './support/ticks.js';
import { until } from './support/until.js';

let cluster: Cluster;
let sandbox: Sandbox;
let sentry: SentrySink;
beforeAll(async () => {
  [cluster, sandbox, sentry] = await Promise.all([
    sharedCluster(),
    startXeroSandbox({ port: 0 }),
    startSentrySink(),
  ]);
});
afterAll(async () => {
  await sentry?.close();
  await sandbox?.close();
  await cluster?.remove();
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

type SentryEvent = { tags?: Record<string, string>; exception?: { values: { type: string }[] } };
const events = () =>
  sentry.items.filter((i) => i.header.type === 'event').map((i) => i.payload as SentryEvent);

describe('request ids, error fields and error tracking', () => {
  it('takes or makes a request id, echoes it, logs it on every line, and reports an unhandled error with it', async () => {
    const url = await migratedDatabase(cluster);
    const server = await spawnServer({
      env: {
        DATABASE_URL: url,
        SENTRY_DSN: sentry.dsn,
        API_KEY_REFRESH_MS: '200',
        TICK_INTERVAL_MS: '300',
        ...sandboxEnv(sandbox),
      },
    });
    try {
      await server.waitForReady();
      const given = await server.get('/readyz', { headers: { 'x-request-id': 'edge-7f2a:1' } });
      expect(given.headers.get('x-request-id')).toBe('edge-7f2a:1');
      expect((await server.get('/readyz')).headers.get('x-request-id')).toMatch(UUID);
      // Liveness touches nothing, not even the request's headers: it gets no id.
      const live = await server.get('/livez', { headers: { 'x-request-id': 'edge-7f2a:2' } });
      expect(live.status).toBe(200);
      expect(live.headers.get('x-request-id')).toBeNull();
      // Not a sane id (spaces, or too long): replaced rather than written into logs.
      const odd = await server.get('/readyz', { headers: { 'x-request-id': 'a b c' } });
      expect(odd.headers.get('x-request-id')).toMatch(UUID);
      expect(
        (await server.get('/nowhere', { headers: { 'x-request-id': 'x'.repeat(129) } })).headers.get(
          'x-request-id',
        ),
      ).toMatch(UUID);

      const org = await createOrg(url, 'Broken Ltd');
      await waitForKey(server, org.apiKey);
      // A bug's shape: the table is gone (42P01), which is not a poisoned pool.
      const client = new pg.Client(url);
      await client.connect();
      await client.query('ALTER TABLE invoice_pushes RENAME TO invoice_pushes_gone');
      await client.end();

      const res = await server.get('/api/invoices', {
        headers: { authorization: `Bearer ${org.apiKey}`, 'x-request-id': 'req-broken-1' },
      });
      expect(res.status).toBe(500);
      expect(res.headers.get('x-request-id')).toBe('req-broken-1');

      const line = await server.waitForLog((l) => l.msg === 'unhandled request error');
      expect(line).toMatchObject({
        level: 'error',
        request_id: 'req-broken-1',
        err: { sqlstate: '42P01', poisoned: false },
      });
      expect(typeof line.time).toBe('string');
      const lines = server.logs.filter((l) => l.request_id === 'req-broken-1');
      expect(lines.length).toBeGreaterThanOrEqual(1);

      const reported = await until(
        async () => events().find((e) => e.tags?.request_id === 'req-broken-1'),
        (e) => e !== undefined,
      );
      expect(reported?.tags).toMatchObject({ request_id: 'req-broken-1', path: '/api/invoices' });

      // The push tick now crashes on the same missing table: logged with its name and run id, and reported.
      const crashed = await server.waitForLog((l) => l.msg === 'tick crashed' && l.tick === 'push-invoices');
      expect(crashed).toMatchObject({ level: 'error', err: { sqlstate: '42P01', poisoned: false } });
      expect(crashed.run_id).toMatch(/^[0-9a-f]{8}$/);
      const tickEvent = await until(
        async () => events().find((e) => e.tags?.tick === 'push-invoices'),
        (e) => e !== undefined,
      );
      expect(tickEvent?.tags).toMatchObject({ tick: 'push-invoices', run_id: crashed.run_id });
    } finally {
      await server.stop();
    }
  });
});
