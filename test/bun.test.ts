// The Bun entry (src/runtime/bun.ts), run by the real `bun` binary from devDependencies: Bun runs the
// TypeScript source directly, so this exercises Bun.serve, its signals and its drain, not a bundle.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { freshDatabase, migratedDatabase } from './support/databases.js';
import { expectFirstStartStoppedBySigint } from './support/first-start-signal.js';
import { startHeartbeatSink } from './support/heartbeat-sink.js';
import type { Cluster } from './support/postgres.js';
import { startSentrySink } from './support/sentry-sink.js';
import { repoRoot, type ServerProcess, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import { sandboxEnv } from './support/ticks.js';
import { until } from './support/until.js';

const bun = resolve(repoRoot, 'node_modules/.bin/bun');
const entry = resolve(repoRoot, 'src/runtime/bun.ts');

let cluster: Cluster;
beforeAll(async () => {
  cluster = sharedCluster();
});
afterAll(async () => {
  await cluster?.remove();
});

const pkgBunVersion = () =>
  (
    JSON.parse(readFileSync(resolve(repoRoot, 'package.json'), 'utf8')) as {
      devDependencies: { bun: string };
    }
  ).devDependencies.bun;

const spawnBun = (env: Record<string, string>) => spawnServer({ command: bun, args: [entry], env });

async function readyz(server: ServerProcess) {
  const res = await server.get('/readyz');
  return {
    status: res.status,
    body: (await res.json()) as { status: string; checks: Record<string, string> },
  };
}

// Each test has a server and a database of its own: they run side by side.
describe.concurrent('Bun entry', () => {
  it('records its tick runs: /healthz/ticks, Sentry check-ins and heartbeats', async () => {
    const url = await migratedDatabase(cluster);
    const [sandbox, sentry, heartbeats] = await Promise.all([
      startXeroSandbox({ port: 0 }),
      startSentrySink(),
      startHeartbeatSink(),
    ]);
    const server = await spawnBun({
      DATABASE_URL: url,
      ...sandboxEnv(sandbox),
      TICK_INTERVAL_MS: '500',
      SENTRY_DSN: sentry.dsn,
      TICK_HEARTBEAT_URL_REFRESH_TOKENS: heartbeats.urlFor('refresh'),
      FLY_MACHINE_ID: 'bun-1',
    });
    try {
      await server.waitForReady();
      const { body } = await until(
        async () => {
          const res = await server.get('/healthz/ticks');
          return {
            status: res.status,
            body: (await res.json()) as {
              ticks: Record<
                string,
                { status: string; last_success_at: string | null; instances: { instance: string }[] }
              >;
            },
          };
        },
        (h) => h.status === 200 && Object.values(h.body.ticks).every((t) => t.last_success_at !== null),
        10_000,
      );
      expect(Object.keys(body.ticks).sort()).toEqual([
        'deliver-webhooks',
        'prune-webhooks',
        'push-invoices',
        'refresh-tokens',
        'sweep',
      ]);
      expect(body.ticks['push-invoices']?.instances.map((i) => i.instance)).toEqual(['bun-1']);
      await until(
        async () => sentry.items.filter((i) => i.header.type === 'check_in' && i.payload.status === 'ok'),
        (items) => items.length > 0,
        5000,
      );
      await until(
        async () => heartbeats.pings.filter((p) => p.check === 'refresh' && p.signal === 'success'),
        (pings) => pings.length > 0,
        5000,
      );
      expect(await server.stop()).toBe(0);
    } finally {
      server.kill('SIGKILL');
      await Promise.allSettled([sandbox.close(), sentry.close(), heartbeats.close()]);
    }
  });

  it('uses the bun binary pinned in devDependencies', () => {
    const pkg = JSON.parse(readFileSync(resolve(repoRoot, 'package.json'), 'utf8')) as {
      devDependencies: Record<string, string>;
    };
    expect(execFileSync(bun, ['--version'], { encoding: 'utf8' }).trim()).toBe(pkg.devDependencies.bun);
  });

  it('boots through the same contract and answers /livez and /readyz', async () => {
    const url = await freshDatabase(cluster);
    const server = await spawnBun({ DATABASE_URL: url });
    try {
      await server.waitForReady();
      const steps = server.logs.filter((l) => l.msg === 'boot step').map((l) => l.step);
      expect(steps).toEqual([
        'telemetry',
        'logging',
        'error tracking',
        'open pool',
        'migrate',
        'load api-key registry',
        'bind listener',
        'start loops',
        'open gate',
      ]);
      expect(server.logs.find((l) => l.msg === 'listening')?.port).toBe(server.port);
      expect(server.logs[0]).toMatchObject({ msg: 'starting', runtime: 'bun', version: pkgBunVersion() });

      const live = await server.get('/livez');
      expect(live.status).toBe(200);
      expect(await live.json()).toEqual({ status: 'ok' });
      expect(await readyz(server)).toEqual({
        status: 200,
        body: { status: 'ok', checks: { boot: 'ok', database: 'ok' } },
      });
      expect(await server.stop()).toBe(0);
    } finally {
      server.kill('SIGKILL');
    }
  });

  it('on SIGTERM turns draining at once, finishes the in-flight request and exits 0', async () => {
    const url = await migratedDatabase(cluster);
    const server = await spawnBun({ DATABASE_URL: url, PROBE_TIMEOUT_MS: '8000', SHUTDOWN_DELAY_MS: '2000' });
    const locker = new pg.Client(url);
    try {
      await server.waitForReady();
      expect((await readyz(server)).status).toBe(200);

      // Hold the heartbeat row so the next probe (and the request waiting on it) is slow.
      await locker.connect();
      await locker.query('BEGIN');
      await locker.query('SELECT * FROM health_heartbeat FOR UPDATE');
      const inFlight = readyz(server);
      inFlight.catch(() => {}); // awaited below; a failing assertion before that must not leave it unhandled
      await new Promise((r) => setTimeout(r, 300));

      server.kill('SIGTERM');
      await server.waitForLog((l) => l.msg === 'shutdown started');
      const started = Date.now();
      const draining = await readyz(server);
      expect(Date.now() - started).toBeLessThan(1000);
      expect(draining.status).toBe(503);
      expect(draining.body.checks.boot).toBe('draining');
      expect((await server.get('/livez')).status).toBe(200);

      // Past the drain delay the listener stops accepting while the slow request is still in flight:
      // Bun's graceful stop must wait for it rather than cut it.
      await server.waitForLog((l) => l.msg === 'shutdown stage' && l.stage === 'drain delay');
      await new Promise((r) => setTimeout(r, 200));
      await expect(server.get('/livez')).rejects.toThrow();
      expect(server.logs.some((l) => l.msg === 'shutdown stage' && l.stage === 'drain http')).toBe(false);

      await locker.query('COMMIT');
      const finished = await inFlight;
      expect(finished.status).toBe(200);
      expect(finished.body.checks).toEqual({ boot: 'ok', database: 'ok' });
      expect(await server.exited).toBe(0);
      expect(server.logs.some((l) => l.msg === 'shutdown stage' && l.stage === 'drain http')).toBe(true);
    } finally {
      await locker.end().catch(() => {});
      server.kill('SIGKILL');
    }
  });
  it("answers a request that takes longer than Bun's default 10 s idle timeout", async () => {
    const url = await migratedDatabase(cluster);
    const server = await spawnBun({ DATABASE_URL: url, PROBE_TIMEOUT_MS: '20000' });
    const locker = new pg.Client(url);
    try {
      await server.waitForReady();
      // A probe held by the heartbeat row's lock: legitimate, bounded by PROBE_TIMEOUT_MS, and slow.
      await locker.connect();
      await locker.query('BEGIN');
      await locker.query('SELECT * FROM health_heartbeat FOR UPDATE');
      const slow = readyz(server);
      slow.catch(() => {}); // awaited below
      await new Promise((r) => setTimeout(r, 11_000));
      await locker.query('COMMIT');
      expect(await slow).toEqual({
        status: 200,
        body: { status: 'ok', checks: { boot: 'ok', database: 'ok' } },
      });
    } finally {
      await locker.end().catch(() => {});
      server.kill('SIGKILL');
    }
  }, 30_000);
});

describe('Bun entry: a signal during boot', () => {
  it('stops a boot waiting on the migration lock at once on SIGTERM, exiting 143', async () => {
    const url = await freshDatabase(cluster);
    const holder = new pg.Client({ connectionString: url, application_name: 'bun-lock-holder' });
    await holder.connect();
    await holder.query('SELECT pg_advisory_lock($1)', ['4875233190112093']); // migration-lock.ts's key
    const server = await spawnBun({ DATABASE_URL: url });
    try {
      const waiting = await server.waitForLog((l) => l.msg === 'waiting for the migration lock');
      expect(waiting.holder_application_name).toBe('bun-lock-holder');
      const sent = Date.now();
      server.kill('SIGTERM');
      expect(await server.exited).toBe(143);
      expect(Date.now() - sent).toBeLessThan(3000);
      expect(server.logs.some((l) => l.msg === 'listening')).toBe(false);
    } finally {
      await holder.end();
      server.kill('SIGKILL');
    }
  });

  it("stops the embedded database's first start at once on SIGINT", async () => {
    await expectFirstStartStoppedBySigint(await spawnBun({ DATABASE_URL: 'memory://' }));
  });
});
