// isPoisoned/poisonReason against REAL error objects: each captured case was thrown (or emitted) by
// a real driver talking to a real server (primary, standby, fault proxy, local Neon proxy, PGlite),
// and its shape check records where that driver really puts the SQLSTATE or errno. The few cases we
// cannot provoke here are hand-built in packages/platform/test/poison.test.ts and say so in their names.
import dns from 'node:dns';
import { PGlite, messages as pgliteMessages } from '@electric-sql/pglite';
import { isPoisoned, poisonReason } from '@honest-health/platform';
import {
  DatabaseError as NeonDatabaseError,
  NeonDbError,
  Pool as NeonPool,
  neon,
  neonConfig,
} from '@neondatabase/serverless';
import { DrizzleQueryError, sql } from 'drizzle-orm';
import { drizzle as drizzleNeonHttp } from 'drizzle-orm/neon-http';
import { drizzle as drizzleNeonWs } from 'drizzle-orm/neon-serverless';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import ws from 'ws';
import { type NeonProxy, startNeonProxy } from '../dev/neon-proxy/server.js';
import { type FaultProxy, startFaultProxy } from './support/fault-proxy.js';
import { freePort } from './support/ports.js';
import { type Cluster, runPgTool, startCluster, startStandby } from './support/postgres.js';

// biome-ignore lint/suspicious/noExplicitAny: the shape checks poke at driver-specific fields.
type Any = any;

const captured = new Map<string, unknown>();
function capture(key: string, err: unknown): void {
  if (captured.has(key)) throw new Error(`captured twice: ${key}`);
  captured.set(key, err);
}

/** The rejection of `run()`; throws if it succeeded, since then nothing was provoked. */
async function failure(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    return error;
  }
  throw new Error('expected a failure, but it succeeded');
}

async function until<T>(check: () => T | undefined | Promise<T | undefined>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

let primary: Cluster;
let standby: Cluster;
let fault: FaultProxy;
let pglite: PGlite;
const neonProxies = new Map<string, NeonProxy>(); // route -> proxy
const pgPools: pg.Pool[] = [];
const pgClients: pg.Client[] = [];
const neonPools: NeonPool[] = [];

interface Queryable {
  query(text: string, params?: unknown[]): Promise<{ rows: Any[] }>;
}

function pgPool(config: pg.PoolConfig = {}): pg.Pool {
  const pool = new pg.Pool({ host: '127.0.0.1', port: primary.port, user: 'postgres', max: 1, ...config });
  pool.on('error', () => {}); // idle clients die on purpose here
  pgPools.push(pool);
  return pool;
}

/** A connected raw client that records every 'error' event it emits. */
async function pgClient(config: pg.ClientConfig = {}): Promise<{ client: pg.Client; errors: unknown[] }> {
  const client = new pg.Client({ host: '127.0.0.1', port: primary.port, user: 'postgres', ...config });
  const errors: unknown[] = [];
  client.on('error', (error) => errors.push(error));
  pgClients.push(client);
  await client.connect();
  return { client, errors };
}

async function backendPid(client: Queryable): Promise<number> {
  return (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
}

/** Waits until backend `pid` is running a statement, so that what comes next hits it mid-query. */
async function waitActive(pid: number, via: Queryable = primary): Promise<void> {
  await until(async () => {
    const { rows } = await via.query('SELECT state FROM pg_stat_activity WHERE pid = $1', [pid]);
    return rows[0]?.state === 'active' ? true : undefined;
  });
}

async function terminate(pid: number): Promise<void> {
  await primary.query('SELECT pg_terminate_backend($1)', [pid]);
}

/** Starts `SELECT pg_sleep(10)` on `client` and resolves once it is running; `.error` is its failure. */
async function sleeper(
  client: Queryable,
  pid?: number,
  via?: Queryable,
): Promise<{ error: Promise<unknown> }> {
  const known = pid ?? (await backendPid(client));
  const error = failure(() => client.query('SELECT pg_sleep(10)'));
  await waitActive(known, via);
  return { error };
}

// The Neon drivers name a host in the connection string; the endpoint functions route it to one of
// our local Neon proxies, which ignore that host and forward to their own upstream.
const neonUrl = (route: string) => `postgres://postgres@${route}.neon.invalid/postgres`;
function neonRoute(host: string): NeonProxy {
  const proxy = neonProxies.get(host.replace(/\.neon\.invalid$/, ''));
  if (proxy === undefined) throw new Error(`no Neon proxy for ${host}`);
  return proxy;
}

function neonPool(route: string): NeonPool {
  const pool = new NeonPool({ connectionString: neonUrl(route), max: 1 });
  pool.on('error', () => {});
  neonPools.push(pool);
  return pool;
}

async function capturePg(): Promise<void> {
  const pool = pgPool();
  const db = drizzlePg({ client: pool });

  // Read-only: a real standby, and a primary session with default_transaction_read_only.
  const onStandby = pgPool({ port: standby.port });
  capture('pg: INSERT on a standby', await failure(() => onStandby.query('INSERT INTO t VALUES (10)')));
  capture(
    'drizzle/pg: INSERT on a standby',
    await failure(() => drizzlePg({ client: onStandby }).execute(sql`INSERT INTO t VALUES (11)`)),
  );
  const readOnly = await pgClient();
  await readOnly.client.query('SET default_transaction_read_only = on');
  capture(
    'pg: INSERT after SET default_transaction_read_only = on',
    await failure(() => readOnly.client.query('INSERT INTO t VALUES (12)')),
  );
  const readOnlyDb = drizzlePg({ client: pgPool() });
  await readOnlyDb.execute(sql`SET default_transaction_read_only = on`); // max: 1, so the same session
  capture(
    'drizzle/pg: INSERT after SET default_transaction_read_only = on',
    await failure(() => readOnlyDb.execute(sql`INSERT INTO t VALUES (13)`)),
  );

  // pg_terminate_backend: mid-query, and while idle (after which the client is not queryable).
  const busy = await pgClient();
  const busyPid = await backendPid(busy.client);
  const sleeping = await sleeper(busy.client, busyPid);
  await terminate(busyPid);
  capture('pg: pg_terminate_backend mid-query', await sleeping.error);
  await until(() => busy.errors[0]);
  capture('pg: client error event after that', busy.errors[0]);

  const idle = await pgClient();
  await terminate(await backendPid(idle.client));
  await until(() => idle.errors[1]);
  capture('pg: idle client terminated, 1st error event', idle.errors[0]);
  capture('pg: idle client terminated, 2nd error event', idle.errors[1]);
  capture('pg: query on a client that already errored', await failure(() => idle.client.query('SELECT 1')));

  const poolErrors: unknown[] = [];
  pool.on('error', (error) => poolErrors.push(error));
  await terminate(await backendPid(pool));
  await until(() => poolErrors[0]);
  capture('pg: pool error event, idle pooled client terminated', poolErrors[0]);

  const drizzlePid = (await db.execute<{ pid: number }>(sql`SELECT pg_backend_pid() AS pid`)).rows[0]?.pid;
  const drizzleSleep = failure(() => db.execute(sql`SELECT pg_sleep(10)`));
  await waitActive(drizzlePid as number);
  await terminate(drizzlePid as number);
  capture('drizzle/pg: pg_terminate_backend mid-query', await drizzleSleep);

  // Refused connections. Node tries every address of a name; a stock /etc/hosts maps localhost to
  // ::1 and 127.0.0.1, this machine's only to 127.0.0.1, so for that one connect the resolver answers
  // both. The two connect attempts and the AggregateError are Node's own.
  const closedPort = await freePort();
  capture(
    'pg: connect to a closed port (127.0.0.1)',
    await failure(() => pgPool({ port: closedPort }).query('SELECT 1')),
  );
  const lookup = dns.lookup;
  dns.lookup = ((hostname: string, options: Any, callback: Any) => {
    if (hostname !== 'localhost' || !options?.all)
      return Reflect.apply(lookup, dns, [hostname, options, callback]);
    callback(null, [
      { address: '::1', family: 6 },
      { address: '127.0.0.1', family: 4 },
    ]);
  }) as typeof dns.lookup;
  try {
    capture(
      'pg: connect to a closed port (localhost: ::1 and 127.0.0.1)',
      await failure(() => pgPool({ host: 'localhost', port: closedPort }).query('SELECT 1')),
    );
  } finally {
    dns.lookup = lookup;
  }
  capture(
    'drizzle/pg: connect to a closed port',
    await failure(() => drizzlePg({ client: pgPool({ port: closedPort }) }).execute(sql`SELECT 1`)),
  );
  capture(
    'pg: Promise.any over two refused connects (AggregateError with no code)',
    await failure(() =>
      Promise.any([pgPool({ port: closedPort }).connect(), pgPool({ port: closedPort }).connect()]),
    ),
  );

  // Negatives: the query is wrong, the connection is fine.
  capture('pg: unique violation', await failure(() => pool.query('INSERT INTO t VALUES (1)')));
  capture('drizzle/pg: unique violation', await failure(() => db.execute(sql`INSERT INTO t VALUES (1)`)));
  capture('pg: foreign key violation', await failure(() => pool.query('INSERT INTO child VALUES (999)')));
  capture('pg: undefined table', await failure(() => pool.query('SELECT * FROM missing_table')));
  capture('drizzle/pg: undefined table', await failure(() => db.execute(sql`SELECT * FROM missing_table`)));
  capture('pg: syntax error', await failure(() => pool.query('SELEC 1')));
  capture('pg: invalid text representation', await failure(() => pool.query("SELECT 'abc'::int")));
  capture(
    'pg: statement timeout',
    await failure(() => pool.query('SET statement_timeout = 50; SELECT pg_sleep(1)')),
  );
  await pool.query('RESET statement_timeout');
  capture(
    'pg: a null query (TypeError from the driver)',
    await failure(async () => pool.query(null as unknown as string)),
  );

  // 40001: two serializable transactions update the same row.
  const [a, b] = [await pgClient(), await pgClient()];
  await a.client.query('BEGIN ISOLATION LEVEL SERIALIZABLE');
  await a.client.query('SELECT v FROM t WHERE id = 1');
  await b.client.query('BEGIN ISOLATION LEVEL SERIALIZABLE');
  await b.client.query('UPDATE t SET v = v + 1 WHERE id = 1');
  await b.client.query('COMMIT');
  capture(
    'pg: serialization failure',
    await failure(() => a.client.query('UPDATE t SET v = v + 1 WHERE id = 1')),
  );
  capture(
    'drizzle/pg: serialization failure (transaction)',
    await failure(() =>
      db.transaction(
        async (tx) => {
          await tx.execute(sql`SELECT v FROM t WHERE id = 1`);
          await b.client.query('UPDATE t SET v = v + 1 WHERE id = 1');
          await tx.execute(sql`UPDATE t SET v = v + 1 WHERE id = 1`);
        },
        { isolationLevel: 'serializable' },
      ),
    ),
  );
  await a.client.query('ROLLBACK');

  // A saturated pool is not poisoned: it is fine, only busy.
  const saturated = pgPool({ max: 1, connectionTimeoutMillis: 200 });
  const held = await saturated.connect();
  capture('pg: pool exhausted (connectionTimeoutMillis)', await failure(() => saturated.connect()));
  held.release();
}

async function captureFaults(): Promise<void> {
  const viaProxy = { port: fault.port };

  // A reset (RST) mid-query.
  const busy = await pgClient(viaProxy);
  const sleeping = await sleeper(busy.client);
  const db = drizzlePg({ client: pgPool(viaProxy) });
  const drizzlePid = (await db.execute<{ pid: number }>(sql`SELECT pg_backend_pid() AS pid`)).rows[0]?.pid;
  const drizzleSleep = failure(() => db.execute(sql`SELECT pg_sleep(10)`));
  await waitActive(drizzlePid as number);
  fault.dropAll();
  capture('pg: fault proxy reset mid-query', await sleeping.error);
  capture('drizzle/pg: fault proxy reset mid-query', await drizzleSleep);
  await until(() => busy.errors[0]);
  capture('pg: client error event after the reset', busy.errors[0]);

  // A black hole: the connect attempt times out.
  fault.blackhole(true);
  capture(
    'pg: connect through a black hole (connectionTimeoutMillis)',
    await failure(() => pgPool({ ...viaProxy, connectionTimeoutMillis: 300 }).query('SELECT 1')),
  );
  fault.blackhole(false);

  // A clean close (FIN) mid-query: the proxy goes away without a reset, and no ErrorResponse.
  const finned = await pgClient(viaProxy);
  const finnedSleep = await sleeper(finned.client);
  await fault.close();
  capture('pg: fault proxy closed (FIN) mid-query', await finnedSleep.error);
}

async function captureNeonHttp(): Promise<void> {
  const onPrimary = neon(neonUrl('primary'));
  const onStandby = neon(neonUrl('standby'));
  capture('neon-http: INSERT on a standby', await failure(() => onStandby`INSERT INTO t VALUES (20)`));
  capture(
    'drizzle/neon-http: INSERT on a standby',
    await failure(() => drizzleNeonHttp({ client: onStandby }).execute(sql`INSERT INTO t VALUES (21)`)),
  );
  capture('neon-http: unique violation', await failure(() => onPrimary`INSERT INTO t VALUES (1)`));
  capture('neon-http: undefined table', await failure(() => onPrimary`SELECT * FROM missing_table`));
  capture(
    'drizzle/neon-http: unique violation',
    await failure(() => drizzleNeonHttp({ client: onPrimary }).execute(sql`INSERT INTO t VALUES (1)`)),
  );
  const big = 11 * 1024 * 1024; // the proxy's limits are Neon's 10 MiB
  capture(
    'neon-http: request body too large (HTTP 413)',
    await failure(() => onPrimary.query('SELECT length($1::text)', ['x'.repeat(big)])),
  );
  capture(
    'neon-http: response too large (HTTP 507)',
    await failure(() => onPrimary.query('SELECT repeat($1, $2::int)', ['x', big])),
  );
  const down = neon(neonUrl('down'));
  capture('neon-http: upstream down (HTTP 500)', await failure(() => down`SELECT 1`));
  capture(
    'drizzle/neon-http: upstream down (HTTP 500)',
    await failure(() => drizzleNeonHttp({ client: down }).execute(sql`SELECT 1`)),
  );
}

async function captureNeonWs(): Promise<void> {
  const onStandby = neonPool('standby');
  capture('neon-ws: INSERT on a standby', await failure(() => onStandby.query('INSERT INTO t VALUES (30)')));
  capture(
    'drizzle/neon-ws: INSERT on a standby',
    await failure(() => drizzleNeonWs({ client: onStandby }).execute(sql`INSERT INTO t VALUES (31)`)),
  );
  const onPrimary = neonPool('primary');
  capture('neon-ws: unique violation', await failure(() => onPrimary.query('INSERT INTO t VALUES (1)')));

  const client = await onPrimary.connect();
  client.on('error', () => {});
  const pid = await backendPid(client);
  const sleeping = await sleeper(client, pid);
  await terminate(pid);
  capture('neon-ws: pg_terminate_backend mid-query', await sleeping.error);
  client.release(true);

  capture(
    'neon-ws: upstream down (local proxy answers 08006)',
    await failure(() => neonPool('down').query('SELECT 1')),
  );
}

/** Closes the "doomed" Neon proxy under connected clients, then uses them and dials it again. */
async function captureNeonProxyGone(): Promise<void> {
  const busy = await neonPool('doomed').connect();
  busy.on('error', () => {});
  const idle = await neonPool('doomed').connect();
  const idleErrors: unknown[] = [];
  idle.on('error', (error) => idleErrors.push(error));
  await idle.query('SELECT 1');
  const sleeping = await sleeper(busy);
  await neonProxies.get('doomed')?.close();

  capture('neon-ws: proxy closed mid-query', await sleeping.error);
  await until(() => idleErrors[0]);
  capture('neon-ws: idle client error event, proxy closed', idleErrors[0]);
  capture('neon-ws: query on that client afterwards', await failure(() => idle.query('SELECT 1')));
  busy.release(true);
  idle.release(true);
  capture('neon-ws: connect to the closed proxy', await failure(() => neonPool('doomed').query('SELECT 1')));
  capture(
    'drizzle/neon-ws: connect to the closed proxy',
    await failure(() => drizzleNeonWs({ client: neonPool('doomed') }).execute(sql`SELECT 1`)),
  );

  const gone = neon(neonUrl('doomed'));
  capture('neon-http: proxy closed (fetch fails)', await failure(() => gone`SELECT 1`));
  capture(
    'drizzle/neon-http: proxy closed (fetch fails)',
    await failure(() => drizzleNeonHttp({ client: gone }).execute(sql`SELECT 1`)),
  );
}

async function capturePglite(): Promise<void> {
  const db = drizzlePglite({ client: pglite });
  capture('pglite: unique violation', await failure(() => pglite.query('INSERT INTO t VALUES (1)')));
  capture('pglite: undefined table', await failure(() => pglite.query('SELECT * FROM missing_table')));
  capture('pglite: invalid text representation', await failure(() => pglite.query("SELECT 'abc'::int")));
  capture('drizzle/pglite: unique violation', await failure(() => db.execute(sql`INSERT INTO t VALUES (1)`)));
  await pglite.exec('SET default_transaction_read_only = on');
  capture(
    'pglite: INSERT after SET default_transaction_read_only = on',
    await failure(() => pglite.query('INSERT INTO t VALUES (2)')),
  );
  capture(
    'drizzle/pglite: INSERT after SET default_transaction_read_only = on',
    await failure(() => db.execute(sql`INSERT INTO t VALUES (3)`)),
  );
  await pglite.exec('SET default_transaction_read_only = off');
}

/** The primary's end: a backend crash (57P02), a smart shutdown (57P03), then a fast stop (57P01). */
async function capturePrimaryShutdown(): Promise<void> {
  const victim = await pgClient();
  const victimPid = await backendPid(victim.client);
  const bystander = await pgClient();
  const notices: unknown[] = [];
  bystander.client.on('notice', (notice) => notices.push(notice));
  const sleeping = await sleeper(bystander.client);
  process.kill(victimPid, 'SIGKILL'); // the postmaster then resets every other backend
  capture('pg: another backend crashed, mid-query', await sleeping.error);
  capture('pg: the notice sent before that', notices[0]);
  await until(() =>
    primary.query('SELECT 1').then(
      () => true,
      () => undefined,
    ),
  );

  const survivor = await pgClient();
  const busy = await pgClient();
  const busyPid = await backendPid(busy.client);
  const db = drizzlePg({ client: pgPool() });
  const drizzlePid = (await db.execute<{ pid: number }>(sql`SELECT pg_backend_pid() AS pid`)).rows[0]?.pid;
  // Smart shutdown waits for open sessions but turns new connections away.
  await runPgTool('pg_ctl', ['-D', primary.dataDir, '-m', 'smart', '-W', 'stop']);
  capture(
    'pg: connect during a smart shutdown',
    await until(() =>
      pgClient().then(
        () => undefined,
        (error: unknown) => error,
      ),
    ),
  );

  const sleepingBusy = failure(() => busy.client.query('SELECT pg_sleep(10)'));
  const drizzleSleep = failure(() => db.execute(sql`SELECT pg_sleep(10)`));
  await waitActive(busyPid, survivor.client);
  await waitActive(drizzlePid as number, survivor.client);
  await primary.stop('fast');
  capture('pg: cluster stopped (fast) mid-query', await sleepingBusy);
  capture('drizzle/pg: cluster stopped (fast) mid-query', await drizzleSleep);
  await until(() => survivor.errors[1]);
  capture('pg: cluster stopped (fast), idle client 1st error event', survivor.errors[0]);
  capture('pg: cluster stopped (fast), idle client 2nd error event', survivor.errors[1]);
}

beforeAll(async () => {
  // In-memory PGlite runs initdb (seconds, ~700 MB): one instance, built while the clusters start.
  const pgliteReady = (async () => {
    pglite = new PGlite();
    await pglite.exec('CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)');
  })();

  primary = await startCluster();
  await primary.query('CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL DEFAULT 0)');
  await primary.query('CREATE TABLE child (parent int REFERENCES t); INSERT INTO t VALUES (1)');
  standby = await startStandby(primary); // the base backup already holds the tables
  fault = await startFaultProxy(primary.port);

  const down = await freePort();
  for (const [route, upstream] of [
    ['primary', primary.url()],
    ['standby', standby.url()],
    ['doomed', primary.url()],
    ['down', `postgres://postgres@127.0.0.1:${down}/postgres`],
  ] as const) {
    neonProxies.set(route, await startNeonProxy({ upstream }));
  }
  neonConfig.fetchEndpoint = (host) => `${neonRoute(host).url}/sql`;
  neonConfig.wsProxy = (host) => `127.0.0.1:${neonRoute(host).port}/v2`;
  neonConfig.useSecureWebSocket = false;
  neonConfig.pipelineConnect = false;
  neonConfig.webSocketConstructor = ws;

  await capturePg();
  await captureFaults();
  await captureNeonHttp();
  await captureNeonWs();
  await captureNeonProxyGone();
  await pgliteReady;
  await capturePglite();
  await capturePrimaryShutdown(); // last: it stops the primary
});

afterAll(async () => {
  await Promise.all([...pgPools, ...neonPools].map((pool) => pool.end().catch(() => {})));
  await Promise.all(pgClients.map((client) => client.end().catch(() => {})));
  await Promise.all([...neonProxies.values()].map((proxy) => proxy.close()));
  await fault?.close();
  await pglite?.close();
  await standby?.remove();
  await primary?.remove();
});

// --- What each captured object really looks like ----------------------------------------------

type Shape = (err: Any) => void;

/** node-postgres: pg-protocol's DatabaseError, SQLSTATE on `.code`. */
const pgDb =
  (code: string): Shape =>
  (e) => {
    expect(e).toBeInstanceOf(pg.DatabaseError);
    expect(e.code).toBe(code);
  };
/** The Neon WebSocket driver bundles its own copy of pg: a different DatabaseError class. */
const neonWsDb =
  (code: string): Shape =>
  (e) => {
    expect(e).toBeInstanceOf(NeonDatabaseError);
    expect(e).not.toBeInstanceOf(pg.DatabaseError);
    expect(e.code).toBe(code);
  };
/** neon() over HTTP: NeonDbError, with the fields of the proxy's 400 answer copied on. */
const neonHttpDb =
  (code: string): Shape =>
  (e) => {
    expect(e).toBeInstanceOf(NeonDbError);
    expect(e.code).toBe(code);
  };
const pgliteDb =
  (code: string): Shape =>
  (e) => {
    expect(e).toBeInstanceOf(pgliteMessages.DatabaseError);
    expect(e.code).toBe(code);
  };
/** Drizzle 0.45: DrizzleQueryError("Failed query: ..."), nothing on `.code`, the driver's error on `.cause`. */
const drizzled =
  (inner: Shape): Shape =>
  (e) => {
    expect(e).toBeInstanceOf(DrizzleQueryError);
    expect(e.code).toBeUndefined();
    expect(e.message).toMatch(/^Failed query: /);
    inner(e.cause);
  };
/** A plain Error with only a message: no code anywhere. */
const plain =
  (message: string | RegExp): Shape =>
  (e) => {
    expect(e.constructor).toBe(Error);
    expect(e.code).toBeUndefined();
    expect(e.cause).toBeUndefined();
    expect(e.message).toMatch(message);
  };
/** A Node system error. */
const sysError =
  (code: string, syscall: string): Shape =>
  (e) => {
    expect(e).toBeInstanceOf(Error);
    expect(e).toMatchObject({ code, syscall, errno: expect.any(Number) });
  };
/** The `ws` ErrorEvent the Neon driver passes through as the error itself: not an Error at all. */
const wsErrorEvent: Shape = (e) => {
  expect(e).not.toBeInstanceOf(Error);
  expect(e.constructor.name).toBe('ErrorEvent');
  expect(e.type).toBe('error');
  expect(e.target).toBeInstanceOf(ws);
  sysError('ECONNREFUSED', 'connect')(e.error);
};
/** neon() when fetch() throws: NeonDbError without a code, the TypeError on `.sourceError` (no `.cause`). */
const neonFetchFailed: Shape = (e) => {
  expect(e).toBeInstanceOf(NeonDbError);
  expect(e.message).toBe('Error connecting to database: TypeError: fetch failed');
  expect(e.code).toBeUndefined();
  expect(e.cause).toBeUndefined();
  expect(e.sourceError).toBeInstanceOf(TypeError);
  expect(e.sourceError.message).toBe('fetch failed');
  sysError('ECONNREFUSED', 'connect')(e.sourceError.cause);
};
const neonHttpStatus =
  (status: number): Shape =>
  (e) => {
    expect(e).toBeInstanceOf(NeonDbError);
    expect(e.code).toBeUndefined();
    expect(e.message).toMatch(new RegExp(`^Server error \\(HTTP status ${status}\\): `));
  };

interface Case {
  key: string;
  /** Expected poisonReason(); undefined = not poisoned. */
  reason: string | undefined;
  shape: Shape;
}

const cases: Case[] = [
  // node-postgres, raw and through drizzle-orm/node-postgres
  { key: 'pg: INSERT on a standby', reason: '25006', shape: pgDb('25006') },
  { key: 'drizzle/pg: INSERT on a standby', reason: '25006', shape: drizzled(pgDb('25006')) },
  { key: 'pg: INSERT after SET default_transaction_read_only = on', reason: '25006', shape: pgDb('25006') },
  {
    key: 'drizzle/pg: INSERT after SET default_transaction_read_only = on',
    reason: '25006',
    shape: drizzled(pgDb('25006')),
  },
  { key: 'pg: pg_terminate_backend mid-query', reason: '57P01', shape: pgDb('57P01') },
  {
    key: 'pg: client error event after that',
    reason: 'connection terminated',
    shape: plain('Connection terminated unexpectedly'),
  },
  { key: 'pg: idle client terminated, 1st error event', reason: '57P01', shape: pgDb('57P01') },
  {
    key: 'pg: idle client terminated, 2nd error event',
    reason: 'connection terminated',
    shape: plain('Connection terminated unexpectedly'),
  },
  {
    key: 'pg: query on a client that already errored',
    reason: 'not queryable',
    shape: plain('Client has encountered a connection error and is not queryable'),
  },
  { key: 'pg: pool error event, idle pooled client terminated', reason: '57P01', shape: pgDb('57P01') },
  { key: 'drizzle/pg: pg_terminate_backend mid-query', reason: '57P01', shape: drizzled(pgDb('57P01')) },
  {
    key: 'pg: connect to a closed port (127.0.0.1)',
    reason: 'ECONNREFUSED',
    shape: sysError('ECONNREFUSED', 'connect'),
  },
  {
    key: 'pg: connect to a closed port (localhost: ::1 and 127.0.0.1)',
    reason: 'ECONNREFUSED',
    shape: (e) => {
      expect(e).toBeInstanceOf(AggregateError);
      expect(e.code).toBe('ECONNREFUSED'); // Node copies the code onto the AggregateError
      expect(e.message).toBe('');
      expect(e.errors.map((x: Any) => x.address)).toEqual(['::1', '127.0.0.1']);
      for (const inner of e.errors) sysError('ECONNREFUSED', 'connect')(inner);
    },
  },
  {
    key: 'drizzle/pg: connect to a closed port',
    reason: 'ECONNREFUSED',
    shape: drizzled(sysError('ECONNREFUSED', 'connect')),
  },
  {
    key: 'pg: Promise.any over two refused connects (AggregateError with no code)',
    reason: 'ECONNREFUSED',
    shape: (e) => {
      expect(e).toBeInstanceOf(AggregateError);
      expect(e.code).toBeUndefined();
      for (const inner of e.errors) sysError('ECONNREFUSED', 'connect')(inner);
    },
  },
  { key: 'pg: unique violation', reason: undefined, shape: pgDb('23505') },
  { key: 'drizzle/pg: unique violation', reason: undefined, shape: drizzled(pgDb('23505')) },
  { key: 'pg: foreign key violation', reason: undefined, shape: pgDb('23503') },
  { key: 'pg: undefined table', reason: undefined, shape: pgDb('42P01') },
  { key: 'drizzle/pg: undefined table', reason: undefined, shape: drizzled(pgDb('42P01')) },
  { key: 'pg: syntax error', reason: undefined, shape: pgDb('42601') },
  { key: 'pg: invalid text representation', reason: undefined, shape: pgDb('22P02') },
  { key: 'pg: statement timeout', reason: undefined, shape: pgDb('57014') },
  {
    key: 'pg: a null query (TypeError from the driver)',
    reason: undefined,
    shape: (e) => {
      expect(e).toBeInstanceOf(TypeError);
      expect(e.message).toBe('Client was passed a null or undefined query');
    },
  },
  { key: 'pg: serialization failure', reason: undefined, shape: pgDb('40001') },
  {
    key: 'drizzle/pg: serialization failure (transaction)',
    reason: undefined,
    shape: drizzled(pgDb('40001')),
  },
  {
    key: 'pg: pool exhausted (connectionTimeoutMillis)',
    reason: undefined,
    shape: plain('timeout exceeded when trying to connect'),
  },

  // node-postgres through the fault proxy
  { key: 'pg: fault proxy reset mid-query', reason: 'ECONNRESET', shape: sysError('ECONNRESET', 'read') },
  {
    key: 'drizzle/pg: fault proxy reset mid-query',
    reason: 'ECONNRESET',
    shape: drizzled(sysError('ECONNRESET', 'read')),
  },
  {
    key: 'pg: client error event after the reset',
    reason: 'ECONNRESET',
    shape: sysError('ECONNRESET', 'read'),
  },
  {
    key: 'pg: connect through a black hole (connectionTimeoutMillis)',
    reason: 'connection terminated',
    shape: (e) => {
      expect(e.message).toBe('Connection terminated due to connection timeout'); // pg-pool's
      plain('Connection terminated unexpectedly')(e.cause);
    },
  },
  {
    key: 'pg: fault proxy closed (FIN) mid-query',
    reason: 'connection terminated',
    shape: plain('Connection terminated unexpectedly'),
  },

  // neon() over HTTP, raw and through drizzle-orm/neon-http
  { key: 'neon-http: INSERT on a standby', reason: '25006', shape: neonHttpDb('25006') },
  { key: 'drizzle/neon-http: INSERT on a standby', reason: '25006', shape: drizzled(neonHttpDb('25006')) },
  { key: 'neon-http: unique violation', reason: undefined, shape: neonHttpDb('23505') },
  { key: 'neon-http: undefined table', reason: undefined, shape: neonHttpDb('42P01') },
  { key: 'drizzle/neon-http: unique violation', reason: undefined, shape: drizzled(neonHttpDb('23505')) },
  { key: 'neon-http: request body too large (HTTP 413)', reason: undefined, shape: neonHttpStatus(413) },
  { key: 'neon-http: response too large (HTTP 507)', reason: undefined, shape: neonHttpStatus(507) },
  { key: 'neon-http: upstream down (HTTP 500)', reason: 'http 500', shape: neonHttpStatus(500) },
  {
    key: 'drizzle/neon-http: upstream down (HTTP 500)',
    reason: 'http 500',
    shape: drizzled(neonHttpStatus(500)),
  },
  { key: 'neon-http: proxy closed (fetch fails)', reason: 'http transport', shape: neonFetchFailed },
  {
    key: 'drizzle/neon-http: proxy closed (fetch fails)',
    reason: 'http transport',
    shape: drizzled(neonFetchFailed),
  },

  // Pool over WebSocket, raw and through drizzle-orm/neon-serverless
  { key: 'neon-ws: INSERT on a standby', reason: '25006', shape: neonWsDb('25006') },
  { key: 'drizzle/neon-ws: INSERT on a standby', reason: '25006', shape: drizzled(neonWsDb('25006')) },
  { key: 'neon-ws: unique violation', reason: undefined, shape: neonWsDb('23505') },
  { key: 'neon-ws: pg_terminate_backend mid-query', reason: '57P01', shape: neonWsDb('57P01') },
  {
    key: 'neon-ws: upstream down (local proxy answers 08006)',
    reason: '08006',
    shape: neonWsDb('08006'),
  },
  // A closed WebSocket reaches the driver's pg fork as a closed socket: no WebSocket in the error.
  {
    key: 'neon-ws: proxy closed mid-query',
    reason: 'connection terminated',
    shape: plain('Connection terminated unexpectedly'),
  },
  {
    key: 'neon-ws: idle client error event, proxy closed',
    reason: 'connection terminated',
    shape: plain('Connection terminated unexpectedly'),
  },
  {
    key: 'neon-ws: query on that client afterwards',
    reason: 'not queryable',
    shape: plain('Client has encountered a connection error and is not queryable'),
  },
  { key: 'neon-ws: connect to the closed proxy', reason: 'websocket error', shape: wsErrorEvent },
  {
    key: 'drizzle/neon-ws: connect to the closed proxy',
    reason: 'websocket error',
    shape: drizzled(wsErrorEvent),
  },

  // PGlite, raw and through drizzle-orm/pglite
  { key: 'pglite: unique violation', reason: undefined, shape: pgliteDb('23505') },
  { key: 'pglite: undefined table', reason: undefined, shape: pgliteDb('42P01') },
  { key: 'pglite: invalid text representation', reason: undefined, shape: pgliteDb('22P02') },
  { key: 'drizzle/pglite: unique violation', reason: undefined, shape: drizzled(pgliteDb('23505')) },
  {
    key: 'pglite: INSERT after SET default_transaction_read_only = on',
    reason: '25006',
    shape: pgliteDb('25006'),
  },
  {
    key: 'drizzle/pglite: INSERT after SET default_transaction_read_only = on',
    reason: '25006',
    shape: drizzled(pgliteDb('25006')),
  },

  // The primary's end
  {
    // PostgreSQL 14+ sends 57P02 as a WARNING (a notice), then closes: what rejects is the close.
    key: 'pg: another backend crashed, mid-query',
    reason: 'connection terminated',
    shape: plain('Connection terminated unexpectedly'),
  },
  {
    key: 'pg: the notice sent before that',
    reason: '57P02',
    shape: (e) => {
      expect(e).not.toBeInstanceOf(Error);
      expect(e).toMatchObject({ name: 'notice', severity: 'WARNING', code: '57P02' });
    },
  },
  { key: 'pg: connect during a smart shutdown', reason: '57P03', shape: pgDb('57P03') },
  { key: 'pg: cluster stopped (fast) mid-query', reason: '57P01', shape: pgDb('57P01') },
  { key: 'drizzle/pg: cluster stopped (fast) mid-query', reason: '57P01', shape: drizzled(pgDb('57P01')) },
  { key: 'pg: cluster stopped (fast), idle client 1st error event', reason: '57P01', shape: pgDb('57P01') },
  {
    key: 'pg: cluster stopped (fast), idle client 2nd error event',
    reason: 'connection terminated',
    shape: plain('Connection terminated unexpectedly'),
  },
];

describe('isPoisoned / poisonReason on errors captured from real servers', () => {
  it('has an expectation for every captured error', () => {
    expect([...captured.keys()].sort()).toEqual(cases.map((c) => c.key).sort());
  });

  for (const { key, reason, shape } of cases) {
    it(`${key} -> ${reason ?? 'not poisoned'}`, () => {
      expect(captured.has(key), `nothing captured for ${key}`).toBe(true);
      const err = captured.get(key);
      shape(err);
      expect(poisonReason(err)).toBe(reason);
      expect(isPoisoned(err)).toBe(reason !== undefined);
    });
  }
});
