// The server behind PgBouncer (Debian's package) in both pool modes: transaction mode hands every
// transaction to any server connection, so named prepared statements and session-level advisory
// locks do not survive there (PgBouncer's feature map: "Protocol-level prepared plans", "Session-level
// advisory locks": Never in transaction pooling, 1.18).

import { detectTransactionPooler } from '@honest-health/platform/internal/db/drivers/pooler-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrations } from '../src/app/migrations.gen.js';
import { createOrg, invoiceBody, waitForKey } from './support/orgs.js';
import { type PgBouncer, pgBouncerMissing, startPgBouncer } from './support/pgbouncer.js';
import { type Cluster, startCluster } from './support/postgres.js';
import { type ServerProcess, spawnServer } from './support/server.js';

const missing = pgBouncerMissing('the PgBouncer tests (test/pooler.test.ts)');

let cluster: Cluster;
let transaction: PgBouncer;
let session: PgBouncer;
let counter = 0;

beforeAll(async () => {
  if (missing) return;
  cluster = await startCluster();
  [transaction, session] = await Promise.all([
    startPgBouncer(cluster, { mode: 'transaction' }),
    startPgBouncer(cluster, { mode: 'session' }),
  ]);
});
afterAll(async () => {
  await Promise.allSettled([transaction?.stop(), session?.stop()]);
  await cluster?.remove();
});

/** A fresh database on the cluster; its name, reachable directly and through either pooler. */
async function freshDatabase(): Promise<string> {
  const name = `pooler_${process.pid}_${++counter}`;
  await cluster.query(`CREATE DATABASE ${name}`);
  return name;
}

const detect = (url: string) => detectTransactionPooler(() => new pg.Client({ connectionString: url }));

async function countRows(database: string, sql: string, params: unknown[] = []): Promise<number> {
  const client = new pg.Client(cluster.url(database));
  await client.connect();
  try {
    return Number((await client.query<{ n: string }>(sql, params)).rows[0]?.n);
  } finally {
    await client.end();
  }
}

const advisoryLocks = async () =>
  Number(
    (await cluster.query<{ n: string }>("SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory'"))
      .rows[0]?.n,
  );

function post(server: ServerProcess, apiKey: string, key: string) {
  return server.get('/api/invoices', {
    method: 'POST',
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      'idempotency-key': key,
    },
    body: JSON.stringify(invoiceBody()),
  });
}

/** 20 concurrent POSTs (10 keys, each twice) for `rounds` rounds; every answer, and the keys used. */
async function postConcurrently(server: ServerProcess, apiKey: string, rounds: number) {
  const statuses: number[] = [];
  const keys: string[] = [];
  for (let round = 0; round < rounds; round++) {
    const roundKeys = Array.from({ length: 10 }, (_, i) => `k-${round}-${i}-${Date.now()}`);
    keys.push(...roundKeys);
    const answers = await Promise.all([...roundKeys, ...roundKeys].map((key) => post(server, apiKey, key)));
    for (const answer of answers) {
      statuses.push(answer.status);
      await answer.arrayBuffer();
    }
  }
  return { statuses, keys };
}

describe.skipIf(missing)('PgBouncer in front of the server', () => {
  it('detects transaction pooling, and no transaction pooling in session mode or direct', async () => {
    expect(await detect(transaction.url())).toBe(true);
    expect(await detect(session.url())).toBe(false);
    expect(await detect(cluster.url())).toBe(false);
  });

  it('transaction mode: 20 concurrent invoice POSTs never answer 500, and store every invoice once', async () => {
    const database = await freshDatabase();
    const server = await spawnServer({
      env: { DATABASE_URL: transaction.url(database), POOL_MAX: '20', API_KEY_REFRESH_MS: '100' },
    });
    try {
      await server.waitForReady();
      const pooler = server.logs.find((l) => l.msg === 'database pooler');
      expect(pooler).toMatchObject({ mode: 'transaction', source: 'detected', named_statements: false });
      const { apiKey } = await createOrg(cluster.url(database), 'pooled');
      await waitForKey(server, apiKey);

      const { statuses, keys } = await postConcurrently(server, apiKey, 5);
      expect(statuses.filter((s) => s >= 500)).toEqual([]);
      // Each key was sent twice at once: one 202 (created) and one 200 (replay) per key.
      expect(statuses.filter((s) => s === 202)).toHaveLength(keys.length);
      expect(statuses.filter((s) => s === 200)).toHaveLength(keys.length);
      expect(await countRows(database, 'SELECT count(*) AS n FROM invoice_pushes')).toBe(keys.length);
      expect(
        await countRows(
          database,
          'SELECT count(*) AS n FROM (SELECT idempotency_key FROM invoice_pushes GROUP BY 1 HAVING count(*) > 1) d',
        ),
      ).toBe(0);
      expect((await server.get('/readyz')).status).toBe(200);
      expect(server.logs.filter((l) => l.level === 'error')).toEqual([]);
    } finally {
      await server.stop();
    }
  });

  it('transaction mode: three boots at once all finish migrate, each migration applied once, no lock left', async () => {
    const database = await freshDatabase();
    for (let attempt = 0; attempt < 2; attempt++) {
      // The second round restarts all three on the migrated database: nothing leaked from the first.
      const servers = await Promise.all(
        [1, 2, 3].map(() =>
          spawnServer({
            env: { DATABASE_URL: transaction.url(database), MIGRATION_LOCK_TIMEOUT_MS: '20000' },
          }),
        ),
      );
      try {
        await Promise.all(servers.map((s) => s.waitForReady(30_000)));
        for (const s of servers) expect((await s.get('/readyz')).status).toBe(200);
        // Each migration takes the lock on its own, so the replicas may share the work: each once.
        const applied = servers.flatMap((s) =>
          s.logs.filter((l) => l.msg === 'migration applied').map((l) => l.migration),
        );
        expect(applied.length).toBe(attempt === 0 ? new Set(applied).size : 0);
        if (attempt === 0)
          expect(applied.filter((m) => !String(m).startsWith('platform:'))).toHaveLength(migrations.length);
      } finally {
        await Promise.all(servers.map((s) => s.stop()));
      }
      expect(await countRows(database, 'SELECT count(*) AS n FROM drizzle.__drizzle_migrations')).toBe(
        migrations.length,
      );
      expect(await advisoryLocks()).toBe(0);
    }
  });

  it('session mode: boots, keeps named statements, and answers concurrent POSTs', async () => {
    const database = await freshDatabase();
    const server = await spawnServer({
      env: { DATABASE_URL: session.url(database), POOL_MAX: '20', API_KEY_REFRESH_MS: '100' },
    });
    try {
      await server.waitForReady();
      const pooler = server.logs.find((l) => l.msg === 'database pooler');
      expect(pooler).toMatchObject({ mode: 'session', source: 'detected', named_statements: true });
      const { apiKey } = await createOrg(cluster.url(database), 'session');
      await waitForKey(server, apiKey);
      const { statuses, keys } = await postConcurrently(server, apiKey, 2);
      expect(statuses.filter((s) => s >= 500)).toEqual([]);
      expect(await countRows(database, 'SELECT count(*) AS n FROM invoice_pushes')).toBe(keys.length);
      expect(await advisoryLocks()).toBe(0);
    } finally {
      await server.stop();
    }
  });

  it('a named statement lost at run time (DATABASE_POOLER=session, wrongly) falls back to unnamed: no 500', async () => {
    const database = await freshDatabase();
    const server = await spawnServer({
      env: {
        DATABASE_URL: transaction.url(database),
        DATABASE_POOLER: 'session',
        POOL_MAX: '20',
        API_KEY_REFRESH_MS: '100',
      },
    });
    try {
      await server.waitForReady();
      const { apiKey } = await createOrg(cluster.url(database), 'misconfigured');
      await waitForKey(server, apiKey);
      const { statuses, keys } = await postConcurrently(server, apiKey, 3);
      expect(statuses.filter((s) => s >= 500)).toEqual([]);
      expect(await countRows(database, 'SELECT count(*) AS n FROM invoice_pushes')).toBe(keys.length);
      const warnings = server.logs.filter((l) => l.msg.startsWith('named prepared statements lost'));
      expect(warnings).toHaveLength(1);
    } finally {
      await server.stop();
    }
  });

  it('DATABASE_POOLER=transaction skips detection and names no statements', async () => {
    const database = await freshDatabase();
    const server = await spawnServer({
      env: {
        DATABASE_URL: transaction.url(database),
        DATABASE_POOLER: 'transaction',
        API_KEY_REFRESH_MS: '100',
      },
    });
    try {
      await server.waitForReady();
      expect(server.logs.find((l) => l.msg === 'database pooler')).toMatchObject({
        mode: 'transaction',
        source: 'configured',
      });
      const { apiKey } = await createOrg(cluster.url(database), 'configured');
      await waitForKey(server, apiKey);
      const { statuses } = await postConcurrently(server, apiKey, 1);
      expect(statuses.filter((s) => s >= 500)).toEqual([]);
    } finally {
      await server.stop();
    }
  });
});
