import type { BootStep } from '../platform/boot.js';
import { BootFailure, runBoot } from '../platform/boot.js';
import { type Config, ConfigError, loadAll, loadConfig } from '../platform/config.js';
import { createDriver } from '../platform/db/driver.js';
import { FailoverEpisodes } from '../platform/db/episode.js';
import { DatabaseHandle } from '../platform/db/handle.js';
import { migrate } from '../platform/db/migrate.js';
import { withPoisonRetry } from '../platform/db/poison-retry.js';
import { WriteProbe } from '../platform/db/probe.js';
import { createErrorTracker, disabledErrorTracker, type ErrorTracker } from '../platform/error-tracking.js';
import { ReadinessGate } from '../platform/gate.js';
import { type HttpConfig, loadHttpConfig } from '../platform/http/config.js';
import { Scheduler } from '../platform/jobs/scheduler.js';
import { createTickRunner } from '../platform/jobs/tick.js';
import { loadTickHealthConfig, type TickHealthConfig } from '../platform/jobs/tick-health-config.js';
import { intervalMonitorConfig, TickMonitor } from '../platform/jobs/tick-monitor.js';
import { createLogger, type Logger } from '../platform/log.js';
import { createSecretBox } from '../platform/secret-box.js';
import { bootInterruptedExitCode, createShutdown } from '../platform/shutdown.js';
import { loadTelemetryConfig } from '../platform/telemetry/config.js';
import { createTelemetry } from '../platform/telemetry/telemetry.js';
import { withTimeout } from '../platform/timeout.js';
import { createApp } from './app.js';
import { type AppConfig, loadAppConfig } from './config.js';
import { developmentKey } from './dev-key.js';
import { migrations } from './migrations.gen.js';
import { Registry } from './registry.js';
import {
  type StartedTelemetry,
  startMetrics,
  startTracing,
  type TelemetryBootOptions,
} from './telemetry-boot.js';
import type { RefreshTickResult } from './ticks/refresh-tokens.js';
import { enabledTicks, registerTicks, TICKS } from './ticks/register.js';
import { createXeroClient } from './xero/client.js';

const DEV_TOKEN_KEY_PATH = '.data/token-encryption-key';

export type FetchHandler = (request: Request) => Response | Promise<Response>;

/** What a runtime's HTTP server must offer: bind (resolves once listening) and drain. */
export interface Listener {
  port: number;
  /** Stop accepting, let in-flight requests finish within the budget, then close every socket. */
  close(budgetMs: number): Promise<void>;
}

export interface ListenOptions {
  port: number;
  host: string;
  http: HttpConfig;
  /** The Host a request without one (HTTP/1.0) is taken to be for. */
  defaultHost: string;
  log: Logger;
}

export type Listen = (fetch: FetchHandler, options: ListenOptions) => Promise<Listener>;

/** A request without a Host header (HTTP/1.0 health checkers) is for this host. */
export const DEFAULT_HOST = 'localhost';

export interface ServerRuntime {
  /** Which runtime runs the server and its version ('node', '24.21.0'): the first line of every boot. */
  name: string;
  version: string;
  env: Record<string, string | undefined>;
  listen: Listen;
  instanceId: string;
  exit(code: number): void;
  /** Routes SIGTERM/SIGINT to the handler; called before boot so no signal finds the default handler. */
  onSignal(handler: (signal: string) => void): void;
  /**
   * Runs `fn` with the signal handlers detached, so that a signal kills the process at once: the
   * embedded database's first start blocks the event loop for seconds, and a handler would only run
   * after it.
   */
  whileSignalsKill?<T>(fn: () => Promise<T>): Promise<T>;
}

// After a signal during boot, steps that watch it stop within a poll; anything else is cut short here.
const BOOT_INTERRUPT_GRACE_MS = 1500;

/**
 * The boot contract for long-lived processes (Node and Bun). Resolves once the gate is open; on a
 * hard failure it logs, reports, cleans up and exits 1 before ever listening.
 */
export async function startServer(runtime: ServerRuntime): Promise<void> {
  // Before the configuration is read, so even a boot that fails on it says what it ran on.
  createLogger().info('starting', { runtime: runtime.name, version: runtime.version, pid: process.pid });
  let config: Config;
  let appConfig: AppConfig;
  let tickHealthConfig: TickHealthConfig;
  let httpConfig: HttpConfig;
  try {
    [config, appConfig, tickHealthConfig, httpConfig] = loadAll<
      [Config, AppConfig, TickHealthConfig, HttpConfig]
    >(
      () => loadConfig(runtime.env),
      () => loadAppConfig(runtime.env),
      () => loadTickHealthConfig(runtime.env, Object.values(TICKS)),
      () => loadHttpConfig(runtime.env),
    );
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    createLogger().error(err.message, { problems: err.problems });
    runtime.exit(1);
    throw err;
  }

  const log = createLogger(config.logLevel);
  // Heartbeats are advisory: a malformed URL is a warning naming the variable (never its value).
  for (const problem of tickHealthConfig.warnings) log.warn('tick heartbeat misconfigured', { problem });
  const telemetryConfig = loadTelemetryConfig(runtime.env);
  // No-ops until the telemetry step swaps in prom-client and, with an exporter, OpenTelemetry.
  const telemetry = createTelemetry();
  let observed: StartedTelemetry | undefined;
  const gate = new ReadinessGate();
  const registry = new Registry();
  let errors: ErrorTracker = disabledErrorTracker;
  const driver = createDriver(config, log);
  // One failover episode for both pools: one warning and one summary, however many see it.
  const episodes = new FailoverEpisodes(log);
  const database = new DatabaseHandle(driver, 'app', log, telemetry, episodes);
  const probeDatabase = new DatabaseHandle(driver, 'probe', log, telemetry, episodes);
  const probe = new WriteProbe({
    probe: probeDatabase,
    app: database,
    timeoutMs: config.probeTimeoutMs,
    instanceId: runtime.instanceId,
    log,
    telemetry,
  });
  const loops = new Scheduler(log);
  // Organizations created or removed elsewhere (the CLI, another replica) reach this process here.
  loops.register({
    name: 'registry refresh',
    intervalMs: config.registryRefreshMs,
    run: () =>
      withPoisonRetry(database, (db) => registry.load(db), { retry: true, source: 'registry refresh', log }),
  });
  let listener: Listener | undefined;
  const bootAbort = new AbortController();
  let bootStep = 'prepare';
  let interruptedExitCode: number | undefined;

  let tokenKey = appConfig.tokenEncryptionKey;
  if (tokenKey === undefined) {
    // Configuration allows this only with the embedded database.
    const dev = developmentKey(DEV_TOKEN_KEY_PATH);
    tokenKey = dev.key;
    log.warn('using a development token encryption key; set TOKEN_ENCRYPTION_KEY for real data', {
      path: DEV_TOKEN_KEY_PATH,
      created: dev.created,
    });
  }
  const box = await createSecretBox(tokenKey);
  // Error tracking is swapped in by its boot step: everything built before reads `errors` on each use.
  const currentErrors: ErrorTracker = {
    capture: (err, ctx) => errors.capture(err, ctx),
    flush: (ms) => errors.flush(ms),
    checkIn: (checkIn, monitorConfig) => errors.checkIn?.(checkIn, monitorConfig),
  };
  const ticks = enabledTicks(appConfig);
  const tickPolicy = { ...tickHealthConfig.policy, startedAtMs: Date.now() };
  const monitor = new TickMonitor({
    database,
    instanceId: runtime.instanceId,
    log,
    errors: currentErrors,
    heartbeats: tickHealthConfig.heartbeats,
    monitorConfig: () =>
      intervalMonitorConfig(appConfig.tickIntervalMs, tickPolicy.intervals, tickPolicy.failures),
    timeoutMs: config.probeTimeoutMs,
  });
  const runTick = createTickRunner(database, log, currentErrors, {
    monitor,
    telemetry,
    onResult: (name, result) => {
      if (name === TICKS.refresh) observed?.countRefreshes(result as RefreshTickResult);
    },
  });
  const xero = createXeroClient(appConfig.xero);
  registerTicks(loops, runTick, {
    config: appConfig,
    xero,
    box,
    owner: `${runtime.instanceId}:${crypto.randomUUID().slice(0, 8)}`,
    log,
  });

  const telemetryBoot: TelemetryBootOptions = {
    telemetry,
    config: telemetryConfig,
    instanceId: runtime.instanceId,
    app: database,
    probeDatabase,
    probe,
    probeTimeoutMs: config.probeTimeoutMs,
    ticks,
    tickPolicy,
    log,
  };
  const steps: BootStep[] = [
    {
      name: 'telemetry',
      kind: 'advisory',
      run: async () => {
        observed = await startMetrics(telemetryBoot);
        await startTracing(telemetryBoot);
      },
    },
    { name: 'logging', kind: 'hard', run: () => log.debug('logging configured', { level: config.logLevel }) },
    {
      name: 'error tracking',
      kind: 'advisory',
      run: async () => {
        if (config.sentryDsn) errors = await createErrorTracker(config.sentryDsn);
      },
    },
    {
      name: 'open pool',
      kind: 'hard',
      run: async () => {
        const ready = () => driver.ready();
        await (runtime.whileSignalsKill ? runtime.whileSignalsKill(ready) : ready());
        await withTimeout(database.pool.query('SELECT 1'), config.probeTimeoutMs, 'database ping');
        const pooler = await driver.inspectPooler?.();
        if (pooler) log.info('database pooler', { ...pooler, named_statements: pooler.mode === 'session' });
      },
    },
    {
      name: 'migrate',
      kind: 'hard',
      run: async () =>
        void (await migrate(database.pool, migrations, log, {
          timeoutMs: config.migrationLockTimeoutMs,
          signal: bootAbort.signal,
        })),
    },
    { name: 'load registry', kind: 'hard', run: () => registry.load(database.db) },
    {
      name: 'bind listener',
      kind: 'hard',
      run: async () => {
        const http = createApp({
          gate,
          probe,
          database,
          registry,
          log,
          errors,
          xero,
          xeroConfig: appConfig.xero,
          box,
          // New work: push now rather than at the next interval (shutdown awaits the run).
          onQueued: () => loops.trigger(TICKS.push),
          onConnected: () => loops.trigger(TICKS.push),
          telemetry,
          metrics: {
            render: async () => (await observed?.registry.render()) ?? '',
            token: telemetryConfig.metricsToken,
          },
          tickHealth: {
            pool: () => probeDatabase.pool,
            ticks,
            policy: tickPolicy,
            token: telemetryConfig.metricsToken,
            timeoutMs: config.probeTimeoutMs,
            log,
          },
        });
        listener = await runtime.listen(http.fetch, {
          port: config.port,
          host: config.host,
          http: httpConfig,
          defaultHost: DEFAULT_HOST,
          log,
        });
        log.info('listening', { host: config.host, port: listener.port });
      },
    },
    { name: 'start loops', kind: 'hard', run: () => loops.start() },
    { name: 'open gate', kind: 'hard', run: () => gate.open() },
  ];

  const closeDatabase = async () => {
    episodes.close();
    await Promise.allSettled([database.close(), probeDatabase.close()]);
    await driver.close();
  };

  const shutdown = createShutdown({
    gate,
    log,
    timeoutMs: config.shutdownTimeoutMs,
    exit: runtime.exit,
    stages: [
      { name: 'stop loops', run: () => loops.stop() },
      // The last runs' health records and pings, each bounded by its own timeout.
      { name: 'settle tick reports', run: () => monitor.idle() },
      // Keep serving (readiness says draining) so a load balancer can take us out of rotation first.
      { name: 'drain delay', run: () => new Promise((done) => setTimeout(done, config.shutdownDelayMs)) },
      { name: 'drain http', run: (budget) => listener?.close(budget) ?? Promise.resolve() },
      { name: 'close database', run: closeDatabase },
      { name: 'flush error tracking', run: async () => void (await errors.flush(2000)) },
      { name: 'flush traces', run: () => telemetry.tracing.shutdown(2000) },
    ],
  });
  // A signal before the gate opened: nothing was served, so there is nothing to drain. Stop the boot
  // now (a migration lock wait ends within a poll and rolls back) and exit 128 + signal number.
  const interruptBoot = (signal: string) => {
    const code = bootInterruptedExitCode(signal);
    if (interruptedExitCode !== undefined) return runtime.exit(code);
    interruptedExitCode = code;
    bootAbort.abort();
    gate.fail();
    log.warn('signal during boot: stopping without serving', { signal, step: bootStep, exit_code: code });
    setTimeout(() => runtime.exit(code), BOOT_INTERRUPT_GRACE_MS);
  };
  let booted = false;
  runtime.onSignal((signal) => (booted ? void shutdown(signal) : interruptBoot(signal)));

  try {
    await runBoot(steps, log, {
      signal: bootAbort.signal,
      onStep: (step) => {
        bootStep = step;
      },
    });
    booted = true;
  } catch (err) {
    gate.fail();
    if (interruptedExitCode !== undefined) {
      await withTimeout(closeDatabase(), 1000, 'closing the database').catch(() => {});
      runtime.exit(interruptedExitCode);
      throw err;
    }
    if (err instanceof BootFailure) errors.capture(err, { step: err.step });
    await Promise.allSettled([errors.flush(2000), telemetry.tracing.shutdown(1000)]);
    // Ending a pool waits for its connection attempts; a failed boot should not wait on a dead host.
    await withTimeout(closeDatabase(), 1000, 'closing the database').catch(() => {});
    runtime.exit(1);
    throw err;
  }
}
