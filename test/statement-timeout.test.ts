// STATEMENT_TIMEOUT_MS: a request-path statement that waits past it is cancelled by Postgres (57014)
// and answered 503 database_timeout with Retry-After, never a 500; the pool stays as it was.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from './support/databases.js';
import { createOrg, invoiceBody, waitForKey } from './support/orgs.js';
import type { Cluster } from './support/postgres.js';
import { type ServerProcess, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';

let cluster: Cluster;
let url: string;
let server: ServerProcess;

beforeAll(async () => {
  cluster = sharedCluster();
  url = await migratedDatabase(cluster);
  server = await spawnServer({
    env: { DATABASE_URL: url, API_KEY_REFRESH_MS: '100', STATEMENT_TIMEOUT_MS: '300' },
  });
  await server.waitForReady();
});
afterAll(async () => {
  await server?.stop();
  await cluster?.remove();
});

const post = (apiKey: string, key: string) =>
  server.get('/api/invoices', {
    method: 'POST',
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      'idempotency-key': key,
    },
    body: JSON.stringify(invoiceBody()),
  });

describe('STATEMENT_TIMEOUT_MS', () => {
  it('answers 503 database_timeout when the insert waits past it, and serves again once it can', async () => {
    const org = await createOrg(url, 'Slow Books');
    await waitForKey(server, org.apiKey);
    // Without a default connection the insert reads the organization FOR SHARE: hold it FOR UPDATE.
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM organizations WHERE id = $1 FOR UPDATE', [org.id]);
      const started = performance.now();
      const res = await post(org.apiKey, 'slow-1');
      expect(performance.now() - started).toBeLessThan(5000);
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('database_timeout');
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    expect((await post(org.apiKey, 'slow-1')).status).toBe(202);
  });
});
