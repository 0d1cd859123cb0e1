import { type Config, type Env, loadAll, loadConfig } from '../platform/config.js';
import { createNeonDriver } from '../platform/db/drivers/neon.js';
import { FailoverEpisodes } from '../platform/db/episode.js';
import { DatabaseHandle } from '../platform/db/handle.js';
import { schemaState } from '../platform/db/migrate.js';
import { WriteProbe } from '../platform/db/probe.js';
import { createErrorTracker, disabledErrorTracker, type ErrorTracker } from '../platform/error-tracking.js';
import { ReadinessGate } from '../platform/gate.js';
import { isProbeMethod, LIVENESS_PATHS, methodNotAllowed } from '../platform/health.js';
import { createTickRunner } from '../platform/jobs/tick.js';
import type { MonitoredTick, TickHealthPolicy } from '../platform/jobs/tick-health.js';
import { loadTickHealthConfig, type TickHealthConfig } from '../platform/jobs/tick-health-config.js';
import { readTickHealth } from '../platform/jobs/tick-health-store.js';
import { intervalMonitorConfig, TickMonitor } from '../platform/jobs/tick-monitor.js';
import { createLogger, type Logger } from '../platform/log.js';
import { withLogContext } from '../platform/log-context.js';
import { observeDatabase } from '../platform/metrics/db-gauges.js';
import { createGaugeRegistry } from '../platform/metrics/gauges.js';
import { observeTickHealth } from '../platform/metrics/tick-gauges.js';
import { createSecretBox, type SecretBox } from '../platform/secret-box.js';
import { loadTelemetryConfig, type TelemetryConfig } from '../platform/telemetry/config.js';
import { requestIdFrom } from '../platform/telemetry/requests.js';
import { noTelemetry } from '../platform/telemetry/telemetry.js';
import { withTimeout } from '../platform/timeout.js';
import { createApp } from './app.js';
import { type AppConfig, loadAppConfig } from './config.js';
import { errorBody } from './errors.js';
import { observeQueueDepth } from './metrics/queue-depth.js';
import { latestMigrationAt } from './migrations.gen.js';
import { Registry } from './registry.js';
import { createTicks, enabledTicks, TICKS } from './ticks/register.js';
import { createXeroClient, type XeroClient } from './xero/client.js';

// Cloudflare Workers have no process to boot: an isolate's first request runs the steps the
// runtime permits (configuration, a database handle, the schema check, the registry). Migrations run
// from the deploy command. A WebSocket cannot outlive its request, so every request (and every cron
// invocation) gets its own database handles, closed through waitUntil.
// Observability here: request ids and structured logs as everywhere; /metrics serves the gauges that
// mean something without a long-lived process (database status, queue depth); traces come from
// Cloudflare's Workers tracing (README), as the OpenTelemetry SDK does not fit the bundle.

export interface ExecutionContextLike {
  waitUntil(promise: Promise<unknown>): void;
}

type Bindings = Record<string, unknown>;

interface Isolate {
  config: Config;
  appConfig: AppConfig;
  log: Logger;
  gate: ReadinessGate;
  registry: Registry;
  registryLoadedAt: number;
  box: SecretBox;
  xero: XeroClient;
  errors: ErrorTracker;
  telemetry: TelemetryConfig;
  episodes: FailoverEpisodes;
  ticks: MonitoredTick[];
  tickHealth: TickHealthConfig;
  /** No startedAtMs: an isolate's start says nothing about whether the cron fires. */
  tickPolicy: TickHealthPolicy;
}

// Every isolate and cron invocation records its runs under one name: on Workers the cron trigger, not
// an isolate, is what runs a tick, and isolates come and go between invocations.
const WORKER_INSTANCE = 'worker';

interface Invocation {
  database: DatabaseHandle;
  probeDatabase: DatabaseHandle;
  close(): Promise<void>;
}

const BOOT_RETRY_MS = [1000, 5000, 30_000];

const live = (method: string) =>
  new Response(method === 'HEAD' ? null : JSON.stringify({ status: 'ok' }), {
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
  });

export function createWorkerHandlers() {
  let isolate: Isolate | undefined;
  let failure: { error: string; retryAt: number; attempts: number } | undefined;
  const gate = new ReadinessGate();

  const invocation = async (iso: Isolate): Promise<Invocation> => {
    // Workers always use Neon: the app over WebSockets unless configured for HTTP; the probe over HTTP.
    const database =
      iso.config.database.driver === 'pglite' || iso.config.database.driver === 'pg'
        ? { ...iso.config.database, driver: 'neon-ws' as const }
        : iso.config.database;
    if (!('url' in database)) throw new Error('DATABASE_URL is required on Workers');
    const driver = createNeonDriver(iso.config, database, iso.log);
    await driver.ready();
    // Handles live per request, the failover episode per isolate: it damps and counts across requests.
    const app = new DatabaseHandle(driver, 'app', iso.log, noTelemetry, iso.episodes);
    const probe = new DatabaseHandle(driver, 'probe', iso.log, noTelemetry, iso.episodes);
    return {
      database: app,
      probeDatabase: probe,
      close: async () => {
        await Promise.allSettled([app.close(), probe.close()]);
      },
    };
  };

  // The isolate's boot: retried after a back-off when it fails, never on every request.
  const boot = async (bindings: Bindings): Promise<Isolate | undefined> => {
    if (isolate) return isolate;
    if (failure && Date.now() < failure.retryAt) return undefined;
    const env = stringBindings(bindings);
    let log = createLogger();
    try {
      const [config, appConfig, tickHealth] = loadAll<[Config, AppConfig, TickHealthConfig]>(
        () => loadConfig({ DATABASE_DRIVER: 'neon-ws', ...env }),
        () => loadAppConfig(env),
        () => loadTickHealthConfig(env, Object.values(TICKS)),
      );
      log = createLogger(config.logLevel);
      if (!appConfig.tokenEncryptionKey) throw new Error('TOKEN_ENCRYPTION_KEY is required on Workers');
      const errors = config.sentryDsn
        ? await createErrorTracker(config.sentryDsn).catch(() => disabledErrorTracker)
        : disabledErrorTracker;
      const telemetry = loadTelemetryConfig(env);
      for (const problem of tickHealth.warnings) log.warn('tick heartbeat misconfigured', { problem });
      if (telemetry.tracesEndpoint) {
        log.warn(
          'OTEL_EXPORTER_OTLP_ENDPOINT is not used on Workers: enable Workers tracing in wrangler.toml',
        );
      }
      const candidate: Isolate = {
        telemetry,
        config,
        appConfig,
        log,
        gate,
        registry: new Registry(),
        registryLoadedAt: 0,
        box: await createSecretBox(appConfig.tokenEncryptionKey),
        xero: createXeroClient(appConfig.xero),
        errors,
        episodes: new FailoverEpisodes(log),
        ticks: enabledTicks(appConfig),
        tickHealth,
        tickPolicy: tickHealth.policy,
      };
      const inv = await invocation(candidate);
      try {
        const schema = await schemaState(inv.database.pool, latestMigrationAt);
        if (schema.status !== 'current') {
          throw new Error(
            `the database schema is ${schema.status} the bundled migrations (run npm run db:migrate)`,
          );
        }
        await candidate.registry.load(inv.database.db);
        candidate.registryLoadedAt = Date.now();
      } finally {
        await inv.close();
      }
      isolate = candidate;
      failure = undefined;
      gate.open();
      log.info('isolate booted');
      return isolate;
    } catch (err) {
      const attempts = (failure?.attempts ?? 0) + 1;
      const wait = BOOT_RETRY_MS[Math.min(attempts - 1, BOOT_RETRY_MS.length - 1)] ?? 30_000;
      failure = {
        error: err instanceof Error ? err.message : String(err),
        retryAt: Date.now() + wait,
        attempts,
      };
      gate.fail();
      log.error('isolate boot failed', { err, retry_in_ms: wait });
      return undefined;
    }
  };

  // Every answer, the Worker's own included, carries the request id its log lines carry.
  const fetch = async (
    request: Request,
    bindings: Bindings,
    ctx: ExecutionContextLike,
  ): Promise<Response> => {
    // Liveness first, as on Node and Bun: no id, no context, no boot.
    const path = new URL(request.url).pathname;
    if (isProbeMethod(request.method) && LIVENESS_PATHS.has(path)) return live(request.method);
    const requestId = requestIdFrom(request.headers);
    return withLogContext({ request_id: requestId }, async () => {
      // A wrong method on liveness is answered without a boot, as liveness itself is.
      const response =
        LIVENESS_PATHS.has(path) && !isProbeMethod(request.method)
          ? methodNotAllowed()
          : await serve(request, bindings, ctx);
      response.headers.set('x-request-id', requestId);
      return response;
    });
  };

  const serve = async (
    request: Request,
    bindings: Bindings,
    ctx: ExecutionContextLike,
  ): Promise<Response> => {
    const path = new URL(request.url).pathname;
    const iso = await boot(bindings);
    if (!iso) {
      if (path === '/readyz') {
        return Response.json(
          { status: 'unavailable', checks: { boot: 'failed', database: 'unreachable' } },
          { status: 503, headers: { 'cache-control': 'no-store' } },
        );
      }
      return Response.json(errorBody('not_ready', 'the service failed to start; retry shortly'), {
        status: 503,
        headers: {
          'retry-after': String(Math.ceil(((failure?.retryAt ?? Date.now()) - Date.now()) / 1000) || 1),
        },
      });
    }
    const inv = await invocation(iso);
    const background: Promise<unknown>[] = [];
    const monitor = tickMonitor(iso, inv.database);
    const runTick = createTickRunner(inv.database, iso.log, iso.errors, { monitor });
    const ticks = createTicks({
      config: iso.appConfig,
      xero: iso.xero,
      box: iso.box,
      owner: 'worker',
      log: iso.log,
    });
    const pushNow = () => void background.push(runTick(TICKS.push, ticks[TICKS.push]).catch(() => {}));
    try {
      if (Date.now() - iso.registryLoadedAt > iso.config.registryRefreshMs) {
        await iso.registry.load(inv.database.db);
        iso.registryLoadedAt = Date.now();
      }
      const probe = new WriteProbe({
        probe: inv.probeDatabase,
        app: inv.database,
        timeoutMs: iso.config.probeTimeoutMs,
        instanceId: 'worker',
        log: iso.log,
      });
      const app = createApp({
        gate: iso.gate,
        probe,
        database: inv.database,
        registry: iso.registry,
        log: iso.log,
        errors: iso.errors,
        xero: iso.xero,
        xeroConfig: iso.appConfig.xero,
        box: iso.box,
        onQueued: pushNow,
        onConnected: pushNow,
        telemetry: noTelemetry,
        metrics: {
          token: iso.telemetry.metricsToken,
          render: () => {
            const gauges = createGaugeRegistry((metric, err) =>
              iso.log.warn('metrics collector failed', { metric, err }),
            );
            observeDatabase(gauges, probe);
            observeQueueDepth(gauges, inv.probeDatabase, iso.config.probeTimeoutMs);
            observeTickHealth(gauges, iso.ticks, iso.tickPolicy, () =>
              withTimeout(readTickHealth(inv.probeDatabase.pool), iso.config.probeTimeoutMs, 'tick health'),
            );
            return gauges.render();
          },
        },
        tickHealth: {
          pool: () => inv.probeDatabase.pool,
          ticks: iso.ticks,
          policy: iso.tickPolicy,
          token: iso.telemetry.metricsToken,
          timeoutMs: iso.config.probeTimeoutMs,
          log: iso.log,
        },
      });
      return await app.fetch(request);
    } finally {
      ctx.waitUntil(
        Promise.allSettled(background)
          .then(() => monitor.idle())
          .then(() => inv.close())
          .then(() => iso.errors.flush(2000)),
      );
    }
  };

  const scheduled = async (
    controller: { cron?: string } | undefined,
    bindings: Bindings,
    ctx: ExecutionContextLike,
  ): Promise<void> => {
    const iso = await boot(bindings);
    if (!iso) return;
    const inv = await invocation(iso);
    // Sentry's monitor gets the trigger's own crontab: the schedule a missed invocation is measured by.
    const cron = typeof controller?.cron === 'string' && controller.cron ? controller.cron : undefined;
    const monitor = tickMonitor(iso, inv.database, cron);
    const runTick = createTickRunner(inv.database, iso.log, iso.errors, { monitor });
    const ticks = createTicks({
      config: iso.appConfig,
      xero: iso.xero,
      box: iso.box,
      owner: 'worker',
      log: iso.log,
    });
    const work = (async () => {
      if (!iso.appConfig.xero.clientId) return;
      // Refresh first: a push with an expired token would only be deferred.
      await runTick(TICKS.refresh, ticks[TICKS.refresh]).catch(() => {});
      await runTick(TICKS.push, ticks[TICKS.push]).catch(() => {});
    })()
      .finally(() => monitor.idle())
      .finally(() => inv.close())
      // Check-ins and crash reports are queued in the SDK: deliver them before the invocation ends.
      .finally(() => iso.errors.flush(2000));
    ctx.waitUntil(work);
    await work;
  };

  return { fetch, scheduled };
}

function tickMonitor(iso: Isolate, database: DatabaseHandle, cron?: string): TickMonitor {
  return new TickMonitor({
    database,
    instanceId: WORKER_INSTANCE,
    log: iso.log,
    errors: iso.errors,
    heartbeats: iso.tickHealth.heartbeats,
    monitorConfig: () =>
      intervalMonitorConfig(
        iso.appConfig.tickIntervalMs,
        iso.tickPolicy.intervals,
        iso.tickPolicy.failures,
        cron ? { type: 'crontab', value: cron } : undefined,
      ),
    timeoutMs: iso.config.probeTimeoutMs,
  });
}

/** Worker bindings hold strings (vars, secrets) and objects (KV, ...); configuration reads the strings. */
function stringBindings(bindings: Bindings): Env {
  return Object.fromEntries(
    Object.entries(bindings).filter((e): e is [string, string] => typeof e[1] === 'string'),
  );
}
