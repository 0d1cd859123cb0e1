import type { AddressInfo } from 'node:net';
import { createServer, type Socket } from 'node:net';
import { createTickRunner } from '@honest-health/platform/internal/jobs/tick';
import { readTickHealth, recordTickFinish } from '@honest-health/platform/internal/jobs/tick-health-store';
import { intervalMonitorConfig, TickMonitor } from '@honest-health/platform/internal/jobs/tick-monitor';
import { disabledErrorTracker } from '@honest-health/platform/internal/util/error-tracking';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { migratedDatabase, ownedDatabase } from './support/databases.js';
import { HEARTBEAT_TEST_KEY, type HeartbeatSink, startHeartbeatSink } from './support/heartbeat-sink.js';
import type { Cluster } from './support/postgres.js';
import { parsePrometheus, sample } from './support/prometheus.js';
import { type SentrySink, startSentrySink } from './support/sentry-sink.js';
import { type ServerProcess, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import { captureLog, openDatabase, type Sandbox, sandboxEnv } from './support/ticks.js';
import { until } from './support/until.js';

// Tick health end to end, on the built Node server: a real Postgres where the app connects as an
// ordinary role (a superuser skips privilege checks, so it could never see 42501), the Xero sandbox,
// a Sentry-protocol sink and a heartbeat sink.

const INTERVAL_MS = 1000;
const METRICS_TOKEN = 'metrics-test-token-0c1d';
const auth = { headers: { authorization: `Bearer ${METRICS_TOKEN}` } };

let cluster: Cluster;
let sandbox: Sandbox;
let sentry: SentrySink;
let heartbeats: HeartbeatSink;
const servers: ServerProcess[] = [];

beforeAll(async () => {
  [cluster, sandbox, sentry, heartbeats] = await Promise.all([
    sharedCluster(),
    startXeroSandbox({ port: 0 }),
    startSentrySink(),
    startHeartbeatSink(),
  ]);
});
afterAll(async () => {
  await Promise.allSettled(servers.map((s) => s.stop()));
  await Promise.allSettled([sandbox?.close(), sentry?.close(), heartbeats?.close()]);
  await cluster?.remove();
});

const xeroEnv = () => ({
  ...sandboxEnv(sandbox),
  TICK_INTERVAL_MS: String(INTERVAL_MS),
  METRICS_TOKEN,
});

async function start(env: Record<string, string>): Promise<ServerProcess> {
  const server = await spawnServer({ env: { ...xeroEnv(), ...env } });
  servers.push(server);
  await server.waitForReady();
  return server;
}

interface Verdict {
  status: string;
  last_success_at: string | null;
  last_failure_at: string | null;
  consecutive_failures: number;
  last_error_code: string | null;
  overdue: boolean;
  failing_instances: string[];
  instances: { instance: string; consecutive_failures: number; last_error_code: string | null }[];
}
interface Report {
  status: string;
  ticks: Record<string, Verdict>;
}

async function tickHealth(server: ServerProcess): Promise<{ status: number; body: Report }> {
  const res = await server.get('/healthz/ticks', auth);
  return { status: res.status, body: (await res.json()) as Report };
}

const PUSH = 'push-invoices';
const REFRESH = 'refresh-tokens';

describe('tick health on Node', () => {
  it('the app role loses UPDATE on invoice_pushes: /healthz/ticks 503 with 42501, error check-ins, /fail; grant back: ok', async () => {
    const db = await ownedDatabase(cluster, 'ticks');
    const server = await start({
      DATABASE_URL: db.url,
      FLY_MACHINE_ID: 'machine-a',
      SENTRY_DSN: sentry.dsn,
      TICK_HEARTBEAT_URL_PUSH_INVOICES: heartbeats.urlFor('push'),
    });

    // Monitoring only, protected like /metrics.
    expect((await server.get('/healthz/ticks')).status).toBe(401);
    expect((await server.get('/healthz')).status).toBe(200);
    const healthy = await until(
      () => tickHealth(server),
      (h) =>
        h.status === 200 && !!h.body.ticks[PUSH]?.last_success_at && !!h.body.ticks[REFRESH]?.last_success_at,
      10 * INTERVAL_MS,
    );
    expect(healthy.body.ticks[PUSH]).toMatchObject({ status: 'ok', consecutive_failures: 0, overdue: false });

    await db.asSuperuser(`REVOKE UPDATE ON invoice_pushes FROM ${db.role}`);
    const revokedAt = Date.now();
    const failing = await until(
      () => tickHealth(server),
      // The sweep tick, which detaches settled pushes, fails on the same grant: wait for the push tick.
      (h) => h.status === 503 && h.body.ticks[PUSH]?.status === 'failing',
      3 * INTERVAL_MS,
      50,
    );
    const toFailing = Date.now() - revokedAt;
    const push = failing.body.ticks[PUSH] as Verdict;
    expect(failing.body.status).toBe('failing');
    expect(push).toMatchObject({
      status: 'failing',
      last_error_code: '42501',
      failing_instances: ['machine-a'],
    });
    expect(push.consecutive_failures).toBeGreaterThanOrEqual(2);
    // The other tick is not blamed, and readiness still routes traffic here: the database takes writes.
    expect(failing.body.ticks[REFRESH]?.status).toBe('ok');
    const ready = await server.get('/readyz');
    expect(ready.status).toBe(200);

    // The metrics say the same, read from the database at scrape time.
    const metrics = parsePrometheus(await (await server.get('/metrics', auth)).text());
    const failures = 'honest_health_tick_consecutive_failures';
    expect(sample(metrics, failures, { tick: PUSH })).toBeGreaterThanOrEqual(2);
    expect(sample(metrics, failures, { tick: REFRESH })).toBe(0);
    const lastSuccess = sample(metrics, 'honest_health_tick_last_success_timestamp_seconds', { tick: PUSH });
    expect(lastSuccess).toBeGreaterThan(0);
    expect(lastSuccess).toBeLessThan(revokedAt / 1000 + 1);

    // Sentry Crons: error check-ins for the push monitor, with its schedule and margin.
    const checkIns = await until(
      async () => sentry.items.filter((i) => i.header.type === 'check_in'),
      (items) => items.some((i) => i.payload.monitor_slug === PUSH && i.payload.status === 'error'),
      5000,
    );
    const error = checkIns.find((i) => i.payload.monitor_slug === PUSH && i.payload.status === 'error');
    expect(error?.payload).toMatchObject({
      monitor_config: {
        schedule: { type: 'interval', value: 1, unit: 'minute' },
        checkin_margin: expect.any(Number),
        max_runtime: expect.any(Number),
      },
    });
    expect(typeof error?.payload.duration).toBe('number');
    // Its run was opened by an in_progress check-in with the same id.
    expect(
      checkIns.some(
        (i) => i.payload.status === 'in_progress' && i.payload.check_in_id === error?.payload.check_in_id,
      ),
    ).toBe(true);
    // Heartbeats: a /fail for the push check, each after its run's /start.
    await until(
      async () => heartbeats.pings.filter((p) => p.check === 'push' && p.signal === 'fail'),
      (fails) => fails.length > 0,
      5000,
    );
    expect(heartbeats.pings.filter((p) => p.check === 'push').at(0)?.signal).toBe('start');

    await db.asSuperuser(`GRANT UPDATE ON invoice_pushes TO ${db.role}`);
    const grantedAt = Date.now();
    const recovered = await until(
      () => tickHealth(server),
      (h) => h.status === 200,
      3 * INTERVAL_MS,
      50,
    );
    const toRecovered = Date.now() - grantedAt;
    expect(recovered.body.ticks[PUSH]).toMatchObject({
      status: 'ok',
      consecutive_failures: 0,
      failing_instances: [],
      // The last failure stays on record for whoever looks later.
      last_error_code: '42501',
    });
    await until(
      async () => sentry.items.filter((i) => i.header.type === 'check_in' && i.payload.monitor_slug === PUSH),
      (items) => items.at(-1)?.payload.status === 'ok' || items.at(-2)?.payload.status === 'ok',
      5000,
    );
    await until(
      async () => heartbeats.pings.filter((p) => p.check === 'push' && p.at > grantedAt),
      (pings) => pings.some((p) => p.signal === 'success'),
      5000,
    );
    console.log(
      `result: tick_failure_to_503_ms=${toFailing} tick_recovery_to_200_ms=${toRecovered} interval_ms=${INTERVAL_MS}`,
    );
    // The heartbeat URL holds a secret: it is never logged (the suite's secret scan checks every line too).
    expect(JSON.stringify(server.logs) + server.output.join('\n')).not.toContain(HEARTBEAT_TEST_KEY);
  });

  it('several replicas: one healthy and one failing shows failing, attributed to the failing instance', async () => {
    const db = await ownedDatabase(cluster, 'ticks');
    const healthyReplica = await start({ DATABASE_URL: db.url, FLY_MACHINE_ID: 'replica-ok' });
    // The second replica connects as a role that may read and write everything but UPDATE the queue.
    const bad = `${db.role}_bad`;
    await cluster.query(`CREATE ROLE ${bad} LOGIN NOSUPERUSER`);
    for (const statement of [
      `GRANT USAGE ON SCHEMA drizzle TO ${bad}`,
      `GRANT SELECT ON ALL TABLES IN SCHEMA drizzle TO ${bad}`,
      `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${bad}`,
      `REVOKE UPDATE ON invoice_pushes FROM ${bad}`,
    ]) {
      await db.asSuperuser(statement);
    }
    const failingReplica = await start({
      DATABASE_URL: `postgres://${bad}@127.0.0.1:${cluster.port}/${db.name}`,
      FLY_MACHINE_ID: 'replica-bad',
    });
    // Either replica answers for the whole fleet: the table is shared.
    for (const server of [healthyReplica, failingReplica]) {
      const { body, status } = await until(
        () => tickHealth(server),
        (h) =>
          h.status === 503 &&
          h.body.ticks[PUSH]?.status === 'failing' &&
          (h.body.ticks[PUSH]?.instances.length ?? 0) === 2,
        6 * INTERVAL_MS,
      );
      expect(status).toBe(503);
      const push = body.ticks[PUSH] as Verdict;
      expect(push).toMatchObject({
        status: 'failing',
        failing_instances: ['replica-bad'],
        last_error_code: '42501',
      });
      expect(push.instances.find((i) => i.instance === 'replica-ok')).toMatchObject({
        consecutive_failures: 0,
        last_error_code: null,
      });
      expect(push.instances.find((i) => i.instance === 'replica-bad')?.last_error_code).toBe('42501');
      expect(body.ticks[REFRESH]?.status).toBe('ok');
    }
  });

  it('a malformed heartbeat URL is a warning at boot, naming the variable: the server serves and ticks', async () => {
    const db = await ownedDatabase(cluster, 'ticks');
    const malformed = `hc-ping.example/${HEARTBEAT_TEST_KEY}/no-scheme`;
    const server = await start({
      DATABASE_URL: db.url,
      TICK_HEARTBEAT_URL_PUSH_INVOICES: malformed,
      TICK_HEARTBEAT_URL_REFRESH_TOKENS: heartbeats.urlFor('refresh'),
    });
    const warning = server.logs.find((l) => l.msg === 'tick heartbeat misconfigured');
    expect(warning?.level).toBe('warn');
    expect(String(warning?.problem)).toContain('TICK_HEARTBEAT_URL_PUSH_INVOICES');
    expect((await server.get('/readyz')).status).toBe(200);
    const { body } = await until(
      () => tickHealth(server),
      (h) => h.status === 200 && !!h.body.ticks[PUSH]?.last_success_at,
      10 * INTERVAL_MS,
    );
    expect(body.ticks[PUSH]?.status).toBe('ok');
    // The valid heartbeat of the other tick still works.
    await until(
      async () => heartbeats.pings.filter((p) => p.check === 'refresh' && p.signal === 'success'),
      (pings) => pings.length > 0,
      5000,
    );
    expect(JSON.stringify(server.logs) + server.output.join('\n')).not.toContain(HEARTBEAT_TEST_KEY);
  });
});

describe('tick health, in process', () => {
  it('a heartbeat that never answers delays no tick: the run ends at once, the ping gives up at its timeout', async () => {
    const url = await migratedDatabase(cluster);
    const { log, lines } = captureLog();
    const handle = await openDatabase(url, log);
    // Accepts connections and never answers: the worst a heartbeat service can do.
    const sockets: Socket[] = [];
    const blackHole = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((done) => blackHole.listen(0, '127.0.0.1', done));
    const port = (blackHole.address() as AddressInfo).port;
    try {
      const monitor = new TickMonitor({
        database: handle,
        instanceId: 'in-process',
        log,
        errors: disabledErrorTracker,
        heartbeats: new Map([['slow', `http://127.0.0.1:${port}/${HEARTBEAT_TEST_KEY}/slow`]]),
        monitorConfig: () => intervalMonitorConfig(60_000, 3, 2),
        timeoutMs: 2000,
        heartbeatTimeoutMs: 1500,
      });
      const runTick = createTickRunner(log, disabledErrorTracker);
      const started = performance.now();
      expect(await runTick('slow', async () => 'done', { database: handle, monitor })).toBe('done');
      const tickMs = performance.now() - started;
      // The tick is done while its start ping still hangs.
      expect(lines.some((l) => l.msg === 'heartbeat ping failed')).toBe(false);
      await monitor.idle();
      const settledMs = performance.now() - started;
      // The run is recorded, whatever became of the ping.
      const snapshot = await readTickHealth(handle.pool);
      expect(snapshot.rows).toEqual([
        expect.objectContaining({ tick: 'slow', instanceId: 'in-process', consecutiveFailures: 0 }),
      ]);
      expect(lines.find((l) => l.msg === 'heartbeat ping failed')).toMatchObject({
        tick: 'slow',
        signal: 'start',
        reason: 'timeout',
        heartbeat: `http://127.0.0.1:${port}/[redacted]`,
      });
      expect(JSON.stringify(lines)).not.toContain(HEARTBEAT_TEST_KEY);
      console.log(
        `result: tick_with_hung_heartbeat_ms=${Math.round(tickMs)} reports_settled_ms=${Math.round(settledMs)}`,
      );
      // The end ping waited for the start ping (order kept), then timed out in its turn.
      expect(lines.filter((l) => l.msg === 'heartbeat ping failed').map((l) => l.signal)).toEqual([
        'start',
        'success',
      ]);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((done) => blackHole.close(done));
      await handle.close();
    }
  });

  it('stays bounded: a write prunes the rows of instances not heard from in 7 days', async () => {
    const url = await migratedDatabase(cluster);
    const { log } = captureLog();
    const handle = await openDatabase(url, log);
    try {
      await handle.pool.query(
        `INSERT INTO tick_health (tick, instance_id, updated_at) VALUES ('t', 'gone', now() - interval '8 days'), ('t', 'recent', now() - interval '6 days')`,
      );
      await recordTickFinish(handle.pool, 't', 'alive', '42501');
      await recordTickFinish(handle.pool, 't', 'alive', '42501');
      const { rows } = await readTickHealth(handle.pool);
      expect(rows.map((r) => r.instanceId).sort()).toEqual(['alive', 'recent']);
      expect(rows.find((r) => r.instanceId === 'alive')).toMatchObject({
        consecutiveFailures: 2,
        lastErrorCode: '42501',
        successMs: null,
      });
    } finally {
      await handle.close();
    }
  });
});
