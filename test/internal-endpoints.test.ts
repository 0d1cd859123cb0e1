// Internal endpoints kept internal, on the built Node server and the Bun entry:
// a boot that would serve /metrics and /healthz/ticks to anyone refuses; METRICS_PORT serves them on a
// listener of their own; and a flood of scrapes does not take readiness down with it.
import { resolve } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from './support/databases.js';
import { createOrg } from './support/orgs.js';
import { freePort } from './support/ports.js';
import type { Cluster } from './support/postgres.js';
import { repoRoot, type SpawnOptions, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';

const bun = resolve(repoRoot, 'node_modules/.bin/bun');
const runtimes: Record<'node' | 'bun', SpawnOptions> = {
  node: {},
  bun: { command: bun, args: [resolve(repoRoot, 'src/runtime/bun.ts')] },
};

let cluster: Cluster;
beforeAll(async () => {
  cluster = sharedCluster();
});
afterAll(async () => {
  await cluster?.remove();
});

describe('boot refuses, in one line and before listening', () => {
  it.each([
    [
      'HOST=0.0.0.0 with neither METRICS_TOKEN nor METRICS_PORT',
      { HOST: '0.0.0.0' },
      /METRICS_PORT or METRICS_TOKEN is required when HOST is not loopback/,
    ],
    [
      'an http:// Xero URL off loopback',
      { HOST: '127.0.0.1', XERO_API_URL: 'http://xero.internal:4010' },
      /XERO_API_URL must be an https:\/\/ URL/,
    ],
  ])('%s', async (_name, env, message) => {
    const server = await spawnServer({ env: { DATABASE_URL: 'memory://', ...env } });
    expect(await server.exited).toBe(1);
    const errors = server.logs.filter((l) => l.level === 'error');
    expect(errors).toHaveLength(1);
    expect(errors[0]?.msg).toMatch(/^invalid configuration: /);
    expect(errors[0]?.msg).toMatch(message);
    expect(server.logs.some((l) => l.msg === 'listening')).toBe(false);
    expect(server.output).toEqual([]);
  });
});

describe.each(Object.keys(runtimes) as (keyof typeof runtimes)[])('%s with METRICS_PORT', (name) => {
  it('serves /metrics and /healthz/ticks only on the internal port, and drains both on SIGTERM', async () => {
    const metricsPort = await freePort();
    const server = await spawnServer({
      ...runtimes[name],
      env: {
        DATABASE_URL: await migratedDatabase(cluster),
        HOST: '0.0.0.0',
        METRICS_PORT: String(metricsPort),
      },
    });
    try {
      await server.waitForReady();
      expect(server.logs.find((l) => l.msg === 'internal endpoints listening')).toMatchObject({
        port: metricsPort,
      });
      const internal = (path: string) => fetch(`http://127.0.0.1:${metricsPort}${path}`);
      for (const path of ['/metrics', '/healthz/ticks']) {
        const outside = await server.get(path);
        expect(outside.status, path).toBe(404);
        expect(await outside.json()).toEqual({ error: { code: 'not_found', message: 'no such route' } });
      }
      const metrics = await internal('/metrics');
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toContain('honest_health_database_status');
      // No ticks configured here (no Xero credentials): nothing is overdue.
      expect((await internal('/healthz/ticks')).status).toBe(200);
      expect((await internal('/readyz')).status).toBe(200);
      expect((await internal('/livez')).status).toBe(200);
      // The app's routes are not on the internal port.
      expect((await internal('/api/invoices')).status).toBe(404);
      expect((await server.get('/api/invoices')).status).toBe(401);
      expect(await server.stop()).toBe(0);
      await expect(internal('/livez')).rejects.toThrow();
    } finally {
      server.kill('SIGKILL');
    }
  });
});

describe('a flood of scrapes', () => {
  it('does not make /readyz fail: the queue-depth COUNT runs once per window, off the probe pool', async () => {
    const url = await migratedDatabase(cluster);
    const TOKEN = 'metrics-test-token-0c1d';
    const server = await spawnServer({ env: { DATABASE_URL: url, METRICS_TOKEN: TOKEN } });
    const db = new pg.Client(url);
    try {
      await server.waitForReady();
      // Enough pushes that one COUNT … GROUP BY takes tens of milliseconds.
      const org = await createOrg(url, 'Scraped');
      await db.connect();
      await db.query(
        `INSERT INTO invoice_pushes (organization_id, idempotency_key, request_hash, payload, status)
         SELECT $1, 'flood-' || n, 'test', '{}'::jsonb, 'awaiting_connection' FROM generate_series(1, 300000) AS n`,
        [org.id],
      );
      await db.query('ANALYZE invoice_pushes');
      const scrape = () =>
        server.get('/metrics', { headers: { authorization: `Bearer ${TOKEN}` } }).then(async (r) => {
          await r.text();
          return r.status;
        });
      const readyz = () =>
        server.get('/readyz?verbose').then(async (r) => ({ status: r.status, body: await r.text() }));
      expect(await scrape()).toBe(200);

      // Three waves of 150 concurrent scrapes, /readyz asked in the middle of each.
      const ready: { status: number; body: string }[] = [];
      for (let wave = 0; wave < 3; wave++) {
        const scrapes = Array.from({ length: 150 }, scrape);
        await new Promise((r) => setTimeout(r, 50));
        ready.push(...(await Promise.all([readyz(), readyz(), readyz()])));
        expect(new Set(await Promise.all(scrapes))).toEqual(new Set([200]));
      }
      for (const r of ready) expect(r.status, r.body).toBe(200);
      const depth = await (
        await server.get('/metrics', { headers: { authorization: `Bearer ${TOKEN}` } })
      ).text();
      expect(depth).toContain('honest_health_queue_depth{status="awaiting_connection"} 300000');
      expect(await server.stop()).toBe(0);
    } finally {
      await db.end().catch(() => {});
      server.kill('SIGKILL');
    }
  }, 90_000);
});
