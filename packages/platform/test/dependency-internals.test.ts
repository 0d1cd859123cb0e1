// What the platform reads of its dependencies beyond their public API, checked against the pinned
// versions, so that an upgrade that removes one fails here instead of silently closing nothing
// (docs/poolers.md, "Private fields"). And the one that moved to public API: pg-pool's queue of
// callers waiting for a client, now failed by our own connect() wrapper.
import { createServer, type Server, type Socket } from 'node:net';
import type { Database } from '@honest-health/platform';
import { createLogger, isPoisoned } from '@honest-health/platform';
import { type PgCompatiblePool, wrapPgCompatiblePool } from '@honest-health/platform/drivers/pg';
import { Pool as NeonPool } from '@neondatabase/serverless';
import pg from 'pg';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeIdleClients, poolInternals } from '../src/db/drivers/pg-pool-internals.js';
import { loadDefaultMetric } from '../src/metrics/default-metrics.js';

const quiet = createLogger('error', {}, () => {});

describe("pg-pool's private fields that closeIdle() uses", () => {
  it('are on a real node-postgres Pool', async () => {
    const pool = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
    expect(poolInternals(pool)).toBeDefined();
    await pool.end();
  });

  it("are on the Neon driver's Pool (a port of pg-pool)", async () => {
    const pool = new NeonPool({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
    expect(poolInternals(pool)).toBeDefined();
    await pool.end();
  });
});

describe('closeIdle() on a pool without those fields', () => {
  it('closes nothing and says so once, not silently', () => {
    const lines: Record<string, unknown>[] = [];
    const log = createLogger('warn', {}, (line) => lines.push(JSON.parse(line)));
    expect(closeIdleClients({ _idle: [{ client: {} }] }, log)).toBe(0);
    expect(closeIdleClients({}, log)).toBe(0);
    expect(lines.map((l) => l.msg)).toEqual([
      'cannot close idle database connections: pg-pool internals changed (see docs/poolers.md)',
    ]);
  });
});

describe("prom-client's default metric modules", () => {
  it('exist for every name collectDefaultMetrics runs, each registering its metrics', () => {
    expect(collectDefaultMetrics.metricsList.length).toBeGreaterThan(5);
    const registry = new Registry();
    for (const name of collectDefaultMetrics.metricsList) {
      if (name === 'eventLoopLag') continue; // starts a timer; test/idle-cpu.test.ts covers it served
      const load = loadDefaultMetric(name);
      expect(typeof load, name).toBe('function');
      load(registry, { eventLoopMonitoringPrecision: 10 });
    }
    expect(typeof loadDefaultMetric('eventLoopLag')).toBe('function');
    expect(registry.getMetricsAsArray().map((m) => m.name)).toContain('process_cpu_seconds_total');
  });
});

describe('ending a pool with callers waiting for a client', () => {
  // A server that accepts and never answers: a client's connect hangs until its timeout.
  let server: Server;
  let port: number;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    server = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('fails them at once with a poison error, instead of after connectionTimeoutMillis', async () => {
    const pool = new pg.Pool({
      connectionString: `postgres://nobody@127.0.0.1:${port}/none`,
      max: 1,
      connectionTimeoutMillis: 20_000,
    });
    const wrapped = wrapPgCompatiblePool(pool as unknown as PgCompatiblePool, {} as Database, 'app', quiet);
    // The first takes the pool's only slot (and hangs); the next two wait in pg-pool's queue.
    const first = pool.connect().catch((err: unknown) => err);
    await until(() => sockets.length === 1);
    const queued = [
      pool.connect().catch((err: unknown) => err),
      wrapped.query('SELECT 1').catch((err: unknown) => err),
    ];
    await new Promise((r) => setTimeout(r, 50));
    expect(pool.waitingCount).toBe(2);
    const startedAt = Date.now();
    const ended = wrapped.end().catch(() => {});
    const errors = await Promise.all(queued);
    expect(Date.now() - startedAt).toBeLessThan(2000);
    for (const err of errors) {
      expect((err as Error).message).toBe('Cannot use a pool after calling end on the pool');
      expect(isPoisoned(err)).toBe(true);
    }
    for (const socket of sockets) socket.destroy();
    await first;
    await ended;
  }, 15_000);
});

async function until(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met');
    await new Promise((r) => setTimeout(r, 10));
  }
}
