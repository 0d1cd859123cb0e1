// The local Neon proxy, driven by the real @neondatabase/serverless driver against a real Postgres:
// neon() over HTTP (/sql) and Pool/Client over WebSocket (/v2).
import dns from 'node:dns';
import { request } from 'node:http';
import {
  type FullQueryResults,
  NeonDbError,
  type NeonQueryFunction,
  neon,
  neonConfig,
  Pool,
} from '@neondatabase/serverless';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { isLoopbackHost, type NeonProxy, startNeonProxy } from '../dev/neon-proxy/server.js';
import { type Cluster, startCluster } from './support/postgres.js';

const FOREIGN_HOST = 'db.example.invalid';

// Every name this process resolves: the proxy must never look up a host a client names.
const lookups: string[] = [];
const originalLookup = dns.lookup;
const originalPromisesLookup = dns.promises.lookup;

// Every URL the driver opens a WebSocket to.
const wsUrls: string[] = [];
class RecordingWebSocket extends WebSocket {
  constructor(address: string) {
    wsUrls.push(address);
    super(address);
  }
}

let cluster: Cluster;
let proxy: NeonProxy;
let sql: NeonQueryFunction<false, false>;
const endpointHosts: string[] = [];
const pools: Pool[] = [];

function newPool(connectionString = cluster.url()): Pool {
  const pool = new Pool({ connectionString, max: 2 });
  pool.on('error', () => {}); // idle clients die with the upstream on restart; queries report it
  pools.push(pool);
  return pool;
}

async function count(where = 'true'): Promise<number> {
  const { rows } = await cluster.query<{ n: number }>(`SELECT count(*)::int AS n FROM items WHERE ${where}`);
  return rows[0]?.n ?? -1;
}

async function waitFor(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function postSql(headers: Record<string, string>, body: unknown) {
  return fetch(`${proxy.url}/sql`, { method: 'POST', headers, body: JSON.stringify(body) });
}

beforeAll(async () => {
  dns.lookup = ((hostname: string, ...rest: unknown[]) => {
    lookups.push(hostname);
    return Reflect.apply(originalLookup, dns, [hostname, ...rest]);
  }) as typeof dns.lookup;
  dns.promises.lookup = ((hostname: string, ...rest: unknown[]) => {
    lookups.push(hostname);
    return Reflect.apply(originalPromisesLookup, dns.promises, [hostname, ...rest]);
  }) as typeof dns.promises.lookup;

  cluster = await startCluster();
  await cluster.query('CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL)');
  proxy = await startNeonProxy({ upstream: cluster.url() });

  // fetchEndpoint is global-only in the driver: neon() takes no endpoint option.
  neonConfig.fetchEndpoint = (host) => {
    endpointHosts.push(host);
    return `${proxy.url}/sql`;
  };
  neonConfig.wsProxy = () => `127.0.0.1:${proxy.port}/v2`;
  neonConfig.useSecureWebSocket = false;
  neonConfig.pipelineConnect = false;
  neonConfig.webSocketConstructor = RecordingWebSocket;
  sql = neon(cluster.url());
});

afterAll(async () => {
  await Promise.all(pools.map((pool) => pool.end().catch(() => {})));
  await proxy?.close();
  await cluster?.remove();
  dns.lookup = originalLookup;
  dns.promises.lookup = originalPromisesLookup;
});

describe('neon() over HTTP', () => {
  it('runs plain and parameterised queries', async () => {
    expect(await sql`SELECT 1 AS one`).toEqual([{ one: 1 }]);
    const name = "O'Brien";
    expect(await sql`SELECT ${name}::text || '!' AS s, ${41}::int + 1 AS n`).toEqual([
      { s: "O'Brien!", n: 42 },
    ]);
    expect(await sql.query('SELECT $1::int * 2 AS d, $2::text IS NULL AS missing', [21, null])).toEqual([
      { d: 42, missing: true },
    ]);
  });

  it('returns types exactly as the driver does over WebSocket', async () => {
    const query = `SELECT 42::int4 AS int, 9007199254740993::int8 AS big, 12.50::numeric AS num,
      '2024-01-02T03:04:05.678Z'::timestamptz AS ts, '{"a": 1, "b": [true, null]}'::jsonb AS doc,
      true AS yes, NULL::text AS nothing, ARRAY[1, 2, 3] AS ints, ARRAY['a', 'b c', NULL] AS texts,
      1.5::float8 AS f, '2024-02-29'::date AS day, 'a"b\\c'::text AS tricky`;
    const [row] = await sql.query(query);
    expect(row).toEqual({
      int: 42,
      big: '9007199254740993',
      num: '12.50',
      ts: new Date('2024-01-02T03:04:05.678Z'),
      doc: { a: 1, b: [true, null] },
      yes: true,
      nothing: null,
      ints: [1, 2, 3],
      texts: ['a', 'b c', null],
      f: 1.5,
      day: expect.any(Date),
      tricky: 'a"b\\c',
    });
    const { rows } = await newPool().query(query);
    expect(row).toEqual(rows[0]);
  });

  it('supports fullResults and arrayMode', async () => {
    const full = await sql.query('SELECT $1::int AS n, $2::text AS t', [7, 'x'], { fullResults: true });
    expect(full).toMatchObject({
      command: 'SELECT',
      rowCount: 1,
      rowAsArray: false,
      rows: [{ n: 7, t: 'x' }],
    });
    expect(full.fields.map((f) => [f.name, f.dataTypeID])).toEqual([
      ['n', 23],
      ['t', 25],
    ]);
    expect(await sql.query('SELECT 1 AS a, 2 AS b', [], { arrayMode: true })).toEqual([[1, 2]]);

    const both = neon(cluster.url(), { arrayMode: true, fullResults: true });
    const inserted =
      (await both`INSERT INTO items VALUES (100, 'x'), (101, 'y') RETURNING id`) as FullQueryResults<true>;
    expect(inserted).toMatchObject({
      command: 'INSERT',
      rowCount: 2,
      rowAsArray: true,
      rows: [[100], [101]],
    });
    const updated = (await both`UPDATE items SET name = 'z' WHERE id >= 100`) as FullQueryResults<true>;
    expect(updated).toMatchObject({ command: 'UPDATE', rowCount: 2, rows: [], fields: [] });
    await sql`DELETE FROM items WHERE id >= 100`;
  });

  it('commits a transaction batch', async () => {
    const [first, second, total] = await sql.transaction([
      sql`INSERT INTO items VALUES (1, 'one')`,
      sql`INSERT INTO items VALUES (2, 'two') RETURNING name`,
      sql`SELECT count(*)::int AS n FROM items`,
    ]);
    expect(first).toEqual([]);
    expect(second).toEqual([{ name: 'two' }]);
    expect(total).toEqual([{ n: 2 }]);
    expect(await count('id IN (1, 2)')).toBe(2);
  });

  it('rolls the whole batch back when a later statement fails', async () => {
    const failing = sql.transaction([
      sql`INSERT INTO items VALUES (3, 'three')`,
      sql`INSERT INTO items VALUES (1, 'duplicate')`,
    ]);
    await expect(failing).rejects.toMatchObject({ code: '23505' });
    expect(await count('id = 3')).toBe(0);
  });

  it('honours read-only, isolation level and deferrable', async () => {
    await expect(
      sql.transaction([sql`INSERT INTO items VALUES (4, 'four')`], { readOnly: true }),
    ).rejects.toMatchObject({ code: '25006' });
    expect(await count('id = 4')).toBe(0);

    const settings = await sql.transaction(
      (tx) => [
        tx`SHOW transaction_isolation`,
        tx`SHOW transaction_read_only`,
        tx`SHOW transaction_deferrable`,
      ],
      { isolationLevel: 'Serializable', readOnly: true, deferrable: true },
    );
    expect(settings).toEqual([
      [{ transaction_isolation: 'serializable' }],
      [{ transaction_read_only: 'on' }],
      [{ transaction_deferrable: 'on' }],
    ]);
  });

  it('surfaces Postgres errors as NeonDbError with their fields', async () => {
    const error = await sql`INSERT INTO items VALUES (1, 'again')`.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NeonDbError);
    expect(error).toMatchObject({
      code: '23505',
      severity: 'ERROR',
      constraint: 'items_pkey',
      table: 'items',
      schema: 'public',
      detail: 'Key (id)=(1) already exists.',
      message: expect.stringContaining('duplicate key value violates unique constraint'),
    });
    await expect(sql.query('SELECT * FROM nowhere')).rejects.toMatchObject({ code: '42P01', position: '15' });
    // Neon runs every query through the extended protocol, which forbids several statements.
    await expect(sql.query('SELECT 1; SELECT 2')).rejects.toMatchObject({ code: '42601' });
    // Failed queries must not poison the pooled connections.
    expect(await sql`SELECT 'still fine' AS s`).toEqual([{ s: 'still fine' }]);
  });

  it('speaks the raw protocol: headers, non-raw JSON values, bad isolation level', async () => {
    const conn = cluster.url();
    const raw = await postSql(
      { 'Neon-Connection-String': conn, 'Neon-Raw-Text-Output': 'true', 'Neon-Array-Mode': 'true' },
      { query: 'SELECT $1::int AS n', params: [5] },
    );
    expect(raw.status).toBe(200);
    expect(await raw.json()).toEqual({
      fields: [
        {
          name: 'n',
          dataTypeID: 23,
          tableID: 0,
          columnID: 0,
          dataTypeSize: 4,
          dataTypeModifier: -1,
          format: 'text',
        },
      ],
      command: 'SELECT',
      rowCount: 1,
      rows: [['5']],
      rowAsArray: true,
    });

    const typed = await postSql(
      { 'Neon-Connection-String': conn },
      {
        query: `SELECT 1 AS a, true AS b, '{"x": 1}'::jsonb AS c, ARRAY[1, NULL] AS d,
          'NaN'::float8 AS e, 5::int8 AS f, $1::int[] AS g`,
        params: [[3, 4]],
      },
    );
    expect((await typed.json()).rows).toEqual([
      { a: 1, b: true, c: { x: 1 }, d: [1, null], e: 'NaN', f: '5', g: [3, 4] },
    ]);

    const batch = await postSql(
      { 'Neon-Connection-String': conn, 'Neon-Batch-Isolation-Level': 'RepeatableRead' },
      { queries: [{ query: 'SELECT 1 AS one' }, { query: 'SELECT 2 AS two', arrayMode: true }] },
    );
    expect(batch.headers.get('neon-batch-isolation-level')).toBe('RepeatableRead');
    // Without Neon-Raw-Text-Output values are JSON-typed; a per-query arrayMode overrides the header.
    expect((await batch.json()).results.map((r: { rows: unknown }) => r.rows)).toEqual([[{ one: 1 }], [[2]]]);

    const bad = await postSql(
      { 'Neon-Connection-String': conn, 'Neon-Batch-Isolation-Level': 'Chaos' },
      { queries: [] },
    );
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ message: 'invalid isolation level' });
  });

  it('ignores the host named in the connection string', async () => {
    const foreign = neon(`postgres://postgres@${FOREIGN_HOST}:6543/postgres`);
    expect(await foreign`SELECT inet_server_port() AS port`).toEqual([{ port: cluster.port }]);
    expect(endpointHosts).toContain(FOREIGN_HOST); // the driver did hand the proxy that host

    const direct = await postSql(
      {
        'Neon-Connection-String': `postgresql://postgres@${FOREIGN_HOST}:1/postgres`,
        'Neon-Array-Mode': 'true',
      },
      { query: 'SELECT inet_server_port() AS port' },
    );
    expect((await direct.json()).rows).toEqual([[cluster.port]]);
    expect(lookups).not.toContain(FOREIGN_HOST);
  });
});

describe('Pool over WebSocket', () => {
  it('runs a query', async () => {
    const { rows } = await newPool().query('SELECT $1::int + 1 AS n', [41]);
    expect(rows).toEqual([{ n: 42 }]);
    expect(wsUrls.at(-1)).toBe(`ws://127.0.0.1:${proxy.port}/v2`);
  });

  it('runs an interactive transaction and rolls it back', async () => {
    const client = await newPool().connect();
    try {
      await client.query('BEGIN');
      await client.query('INSERT INTO items VALUES ($1, $2)', [10, 'ten']);
      const inside = await client.query('SELECT name FROM items WHERE id = 10');
      expect(inside.rows).toEqual([{ name: 'ten' }]);
      expect(await count('id = 10')).toBe(0); // not visible outside the transaction
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await count('id = 10')).toBe(0);
  });

  it('holds a session-level advisory lock, then releases it', async () => {
    const pool = newPool();
    const client = await pool.connect();
    const held = () =>
      cluster
        .query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted",
        )
        .then((r) => r.rows[0]?.n);
    try {
      await client.query('SELECT pg_advisory_lock(1)');
      expect(await held()).toBe(1);
      expect(proxy.stats().openWebSockets).toBeGreaterThanOrEqual(1);
      expect(await sql`SELECT pg_try_advisory_lock(1) AS got`).toEqual([{ got: false }]);
      const { rows } = await client.query('SELECT pg_advisory_unlock(1) AS ok');
      expect(rows).toEqual([{ ok: true }]);
      expect(await held()).toBe(0);
    } finally {
      client.release();
    }
    await pool.end();
    pools.splice(pools.indexOf(pool), 1);
  });

  it('ignores the ?address= host the driver asks for', async () => {
    neonConfig.wsProxy = `127.0.0.1:${proxy.port}/v2`; // string form: the driver appends ?address=host:port
    try {
      const { rows } = await newPool(`postgres://postgres@${FOREIGN_HOST}:6543/postgres`).query(
        'SELECT inet_server_port() AS port',
      );
      expect(rows).toEqual([{ port: cluster.port }]);
      expect(wsUrls.at(-1)).toBe(`ws://127.0.0.1:${proxy.port}/v2?address=${FOREIGN_HOST}:6543`);
      expect(lookups).not.toContain(FOREIGN_HOST);
    } finally {
      neonConfig.wsProxy = () => `127.0.0.1:${proxy.port}/v2`;
    }
  });

  it('closes pipes and keeps counters', async () => {
    await Promise.all(pools.splice(0).map((pool) => pool.end()));
    await waitFor(() => proxy.stats().openWebSockets === 0);
    const stats = proxy.stats();
    expect(stats.webSocketsTotal).toBeGreaterThanOrEqual(4);
    expect(stats.httpRequests).toBeGreaterThan(stats.errors);
    expect(stats.httpQueries).toBeGreaterThan(10);
    expect(stats.errors).toBeGreaterThanOrEqual(6);
  });
});

describe('upstream restart', () => {
  it('reports the outage, then works again without restarting the proxy', async () => {
    const before = newPool();
    expect((await before.query('SELECT 1 AS n')).rows).toEqual([{ n: 1 }]);
    await Promise.all([sql`SELECT 1`, sql`SELECT 2`, sql`SELECT 3`]); // several pooled HTTP connections

    await cluster.stop();
    await expect(newPool().query('SELECT 1')).rejects.toMatchObject({
      code: '08006',
      message: expect.stringContaining('cannot reach the upstream database'),
    });
    await expect(sql`SELECT 1`).rejects.toThrow(/HTTP status 500/);
    await expect(before.query('SELECT 1')).rejects.toThrow();

    await cluster.start();
    expect(await sql`SELECT 'http back' AS s`).toEqual([{ s: 'http back' }]);
    expect((await newPool().query("SELECT 'ws back' AS s")).rows).toEqual([{ s: 'ws back' }]);
  });
});

describe('safety', () => {
  it('refuses to listen on anything but loopback', async () => {
    for (const host of ['0.0.0.0', '::', '192.0.2.1', 'example.com']) {
      await expect(startNeonProxy({ upstream: cluster.url(), host })).rejects.toThrow(/loopback/);
    }
    expect(
      ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost', '::ffff:127.0.0.1'].every(isLoopbackHost),
    ).toBe(true);
    expect(
      ['0.0.0.0', '::', '10.0.0.1', '::ffff:10.0.0.1', 'localhost.example.com'].some(isLoopbackHost),
    ).toBe(false);
    await expect(startNeonProxy({ upstream: 'mysql://127.0.0.1/x' })).rejects.toThrow(/postgres/);
  });

  it('rejects browser origins and non-loopback Host headers', async () => {
    const upgradeStatus = (path: string, origin?: string) =>
      new Promise<number | 'open'>((resolve) => {
        const ws = new WebSocket(
          `ws://127.0.0.1:${proxy.port}${path}`,
          origin === undefined ? {} : { origin },
        );
        ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        ws.on('open', () => {
          ws.terminate();
          resolve('open');
        });
        ws.on('error', () => {});
      });
    expect(await upgradeStatus('/v2', 'https://evil.example')).toBe(403);
    expect(await upgradeStatus('/v2', 'http://localhost:3000')).toBe('open');
    expect(await upgradeStatus('/elsewhere')).toBe(404);

    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: proxy.port,
          path: '/sql',
          method: 'POST',
          headers: { host: 'rebound.example' },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end('{"query":"SELECT 1"}');
    });
    expect(status).toBe(403);
    expect((await fetch(`${proxy.url}/sql`)).status).toBe(405);
  });
});
