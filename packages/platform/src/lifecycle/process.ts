import { migrate } from '../db/migrate.js';
import { poisonReason } from '../db/poison.js';
import { withPoisonRetry } from '../db/poison-retry.js';
import { chooseProcessDatabase, type ProcessDatabase } from '../db/process-database.js';
import { expireReleases, RELEASE_SEEN_EVERY_MS, recordRelease } from '../db/releases.js';
import { releaseOf, requireServableSchema } from '../db/schema-check.js';
import { type HttpConfig, loadHttpConfig } from '../http/config.js';
import { fastRouter } from '../http/fast-router.js';
import { ReadinessGate } from '../http/gate.js';
import { type InternalEndpointsConfig, loadInternalEndpointsConfig } from '../http/internal-endpoints.js';
import { DEFAULT_HOST, type Listen, type Listener } from '../http/listener.js';
import type { AppEnv, AppInstance, ProcessAppModule } from '../http/module.js';
import { createInternalShell, createShell, type ServedScope } from '../http/shell.js';
import { Scheduler } from '../jobs/scheduler.js';
import { createTickRunner, type TickRunner } from '../jobs/tick.js';
import { loadTickHealthConfig, type TickHealthConfig } from '../jobs/tick-health-config.js';
import { intervalMonitorConfig, TickMonitor } from '../jobs/tick-monitor.js';
import { loadTelemetryConfig } from '../telemetry/config.js';
import { type Config, ConfigError, loadAll, loadConfig } from '../util/config.js';
import { createErrorTracker, disabledErrorTracker, type ErrorTracker } from '../util/error-tracking.js';
import { resolveIdentity } from '../util/identity.js';
import { createLogger } from '../util/log.js';
import { noTelemetry, type Telemetry } from '../util/telemetry.js';
import { withTimeout } from '../util/timeout.js';
import { BootFailure, type BootStep, runBoot } from './boot.js';
import { createDatabases, type Databases } from './databases.js';
import { type StartedMetrics, startMetrics, startTracing } from './process-telemetry.js';
import { bootInterruptedExitCode, createShutdown } from './shutdown.js';

/** What a long-lived runtime (platform/runtimes/node.ts, bun.ts) gives the process lifecycle. */
export interface ProcessRuntime {
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

/** What the entry offers the process lifecycle. */
export interface ProcessOptions {
  /**
   * The databases it can reach, each imported from its driver's entry (`@honest-health/platform/drivers/pg`, ...):
   * the configuration (DATABASE_URL, DATABASE_DRIVER) picks one, and an unoffered choice is a configuration error.
   */
  databases: readonly ProcessDatabase[];
  /**
   * This replica's name in the write probe's heartbeat row and in tick records; the host name when
   * unset. A host that names its machines says so here (Fly: `process.env.FLY_MACHINE_ID`).
   */
  instanceId?: string;
  /**
   * This build's name in the database's record of running releases (platform_releases), when
   * RELEASE_ID does not set one; else the newest migration it bundles names it. A host that names its
   * builds says so here (Fly: `process.env.FLY_IMAGE_REF`).
   */
  releaseId?: string;
}

// After a signal during boot, steps that watch it stop within a poll; anything else is cut short here.
const BOOT_INTERRUPT_GRACE_MS = 1500;

/**
 * The boot contract for long-lived processes (ARCHITECTURE.md, "Boot"). Each step builds what the later
 * ones use, in order: telemetry and error tracking (advisory), the pool, migrations and the app's
 * registries (hard), the listener, the loops, then the readiness gate. Resolves once the gate is open; on
 * a hard failure it logs, reports, cleans up and exits 1 before ever listening.
 */
export async function startProcess<C, E extends AppEnv>(
  module: ProcessAppModule<C, E>,
  runtime: ProcessRuntime,
  options: ProcessOptions,
): Promise<void> {
  const identity = resolveIdentity(module.identity);
  // Before the configuration is read, so even a boot that fails on it says what it ran on.
  createLogger().info('starting', { runtime: runtime.name, version: runtime.version, pid: process.pid });
  let config: Config;
  let appConfig: C;
  let tickHealthConfig: TickHealthConfig;
  let httpConfig: HttpConfig;
  let internal: InternalEndpointsConfig;
  let database: ProcessDatabase;
  try {
    [config, appConfig, tickHealthConfig, httpConfig, internal] = loadAll<
      [Config, C, TickHealthConfig, HttpConfig, InternalEndpointsConfig]
    >(
      () => loadConfig(runtime.env),
      () => module.loadConfig(runtime.env),
      () => loadTickHealthConfig(runtime.env, module.tickNames),
      () => loadHttpConfig(runtime.env),
      () => loadInternalEndpointsConfig(runtime.env),
    );
    database = chooseProcessDatabase(options.databases, config);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    createLogger().error(err.message, { problems: err.problems });
    runtime.exit(1);
    throw err;
  }

  const log = createLogger(config.logLevel, {}, undefined, poisonReason);
  // Heartbeats are advisory: a malformed URL is a warning naming the variable (never its value).
  for (const problem of tickHealthConfig.warnings) log.warn('tick heartbeat misconfigured', { problem });
  const telemetryConfig = loadTelemetryConfig(runtime.env, identity);
  const gate = new ReadinessGate();
  const loops = new Scheduler(log);
  const bootAbort = new AbortController();
  let app: AppInstance<E>;
  try {
    app = await module.create(appConfig, {
      lifecycle: 'process',
      instanceId: runtime.instanceId,
      log,
      embedded: config.database.driver === 'pglite',
    });
  } catch (err) {
    // Before any step: nothing to clean up. A configuration the app refuses is one line, as above.
    if (err instanceof ConfigError) log.error(err.message, { problems: err.problems });
    else log.error('boot failed building the app', { err });
    runtime.exit(1);
    throw err;
  }
  const ticks = app.ticks.map(({ name, intervalMs }) => ({ name, intervalMs }));
  const tickPolicy = { ...tickHealthConfig.policy, startedAtMs: Date.now() };
  const schema = { latestMigrationAt: module.latestMigrationAt, needs: module.schemaNeeds };
  const release = releaseOf(schema, runtime.name, config.releaseId ?? options.releaseId);

  // Built by the boot steps, each from what the steps before it built.
  let telemetry: Telemetry = noTelemetry;
  let metrics: StartedMetrics | undefined;
  let errors: ErrorTracker = disabledErrorTracker;
  let databases: Databases | undefined;
  let monitor: TickMonitor | undefined;
  let listener: Listener | undefined;
  /** Work requests left running after their answer (c.var.waitUntil): shutdown awaits it. */
  const background = new Set<Promise<unknown>>();
  let internalListener: Listener | undefined;
  let bootStep = 'prepare';
  let interruptedExitCode: number | undefined;

  const openPool = async (): Promise<Databases> => {
    const driver = database.createDriver(config, log, identity);
    const dbs = createDatabases(driver, {
      log,
      telemetry,
      probeTimeoutMs: config.probeTimeoutMs,
      instanceId: runtime.instanceId,
    });
    databases = dbs;
    const ready = () => driver.ready();
    await (runtime.whileSignalsKill ? runtime.whileSignalsKill(ready) : ready());
    await withTimeout(dbs.appDatabase.pool.query('SELECT 1'), config.probeTimeoutMs, 'database ping');
    const pooler = await driver.inspectPooler?.();
    if (pooler) log.info('database pooler', { ...pooler, named_statements: pooler.mode === 'session' });
    metrics?.observe(dbs, ticks, tickPolicy, config.probeTimeoutMs);
    return dbs;
  };

  const startLoops = (dbs: Databases, runTick: TickRunner, tickMonitor: TickMonitor) => {
    // While this release runs, a contract migration that removes what it needs is refused.
    loops.register({
      name: 'release seen',
      intervalMs: RELEASE_SEEN_EVERY_MS,
      run: () =>
        withPoisonRetry(dbs.appDatabase, (db) => recordRelease(db, release), {
          retry: true,
          source: 'background',
          name: 'release seen',
          log,
        }),
    });
    // Organizations created or removed elsewhere (the CLI, another replica) reach this process here.
    for (const registry of app.registries) {
      const { refreshMs } = registry;
      if (refreshMs === undefined) continue;
      loops.register({
        name: `${registry.name} refresh`,
        intervalMs: refreshMs,
        run: () =>
          withPoisonRetry(dbs.appDatabase, (d) => registry.load(d), {
            retry: true,
            source: 'background',
            name: `${registry.name} refresh`,
            log,
          }),
      });
    }
    const target = { database: dbs.appDatabase, monitor: tickMonitor };
    for (const tick of app.ticks) {
      loops.register({
        name: tick.name,
        intervalMs: tick.intervalMs,
        run: async () => void (await runTick(tick.name, tick.run, target)),
      });
    }
    loops.start();
  };

  const bindListener = async (dbs: Databases) => {
    const parts = {
      gate,
      log,
      errors,
      telemetry,
      metrics: {
        token: telemetryConfig.metricsToken,
        render: async () => (await metrics?.registry.render()) ?? '',
      },
      tickHealth: {
        ticks,
        policy: tickPolicy,
        token: telemetryConfig.metricsToken,
        timeoutMs: config.probeTimeoutMs,
        log,
      },
    };
    const shell = createShell({
      app,
      ...parts,
      internalEndpoints: internal.port === undefined ? 'here' : 'elsewhere',
      clientIpHeader: config.clientIpHeader,
      router: fastRouter(),
    });
    // New work is run now rather than at the next interval (shutdown awaits the run).
    const scope: ServedScope = {
      database: dbs.appDatabase,
      probeDatabase: dbs.probeDatabase,
      writeProbe: dbs.writeProbe,
      schedule: (tick) => loops.trigger(tick),
      waitUntil: (work) => {
        background.add(work);
        const forget = () => background.delete(work);
        work.then(forget, forget);
      },
    };
    listener = await runtime.listen(
      (request, connection) => shell.fetch(request, { ...scope, clientAddress: connection?.remoteAddress }),
      {
        port: config.port,
        host: config.host,
        http: httpConfig,
        defaultHost: DEFAULT_HOST,
        log,
      },
    );
    log.info('listening', { host: config.host, port: listener.port });
    if (internal.port !== undefined) {
      const internalShell = createInternalShell(parts);
      internalListener = await runtime.listen((request) => internalShell.fetch(request, scope), {
        port: internal.port,
        host: config.host,
        http: httpConfig,
        defaultHost: DEFAULT_HOST,
        log,
      });
      log.info('internal endpoints listening', { host: config.host, port: internalListener.port });
    }
  };

  const need = <T>(part: T | undefined): T => {
    if (part === undefined) throw new Error('boot steps ran out of order');
    return part;
  };

  const steps: BootStep[] = [
    {
      name: 'telemetry',
      kind: 'advisory',
      run: async () => {
        // Metrics first, so that a malformed trace exporter (the step's warning) does not cost them too.
        metrics = await startMetrics(app, identity, log);
        telemetry = { metrics: metrics.platform, tracing: noTelemetry.tracing };
        const tracing = await startTracing(telemetryConfig, runtime.instanceId, log);
        if (tracing) telemetry = { ...telemetry, tracing };
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
    { name: 'open pool', kind: 'hard', run: async () => void (await openPool()) },
    {
      name: 'migrate',
      kind: 'hard',
      run: async () => {
        const { pool } = need(databases).appDatabase;
        await migrate(pool, module.migrations, log, {
          timeoutMs: config.migrationLockTimeoutMs,
          lockAttemptMs: config.migrationLockAttemptMs,
          releaseWindowMs: config.releaseWindowMs,
          signal: bootAbort.signal,
        });
        // The schema may be ahead of this release (a newer one migrated first): it serves unless a
        // contract removed what it needs.
        await requireServableSchema(pool, schema, log);
        // Recorded for the contract check; a role that may not write it still serves, with a warning.
        await recordRelease(pool.db, release)
          .then(() => expireReleases(pool))
          .then(
            () => log.info('release recorded', { release: release.id }),
            (err: unknown) => log.warn('recording the release failed', { release: release.id, err }),
          );
      },
    },
    ...app.registries.map(
      (registry): BootStep => ({
        name: `load ${registry.name}`,
        kind: 'hard',
        run: () => registry.load(need(databases).appDatabase.db),
      }),
    ),
    { name: 'bind listener', kind: 'hard', run: () => bindListener(need(databases)) },
    {
      name: 'start loops',
      kind: 'hard',
      run: () => {
        const dbs = need(databases);
        monitor = new TickMonitor({
          database: dbs.appDatabase,
          instanceId: runtime.instanceId,
          log,
          errors,
          heartbeats: tickHealthConfig.heartbeats,
          monitorConfig: (tick) =>
            intervalMonitorConfig(
              ticks.find((t) => t.name === tick)?.intervalMs ?? 60_000,
              tickPolicy.intervals,
              tickPolicy.failures,
            ),
          timeoutMs: config.probeTimeoutMs,
        });
        const tickResult = metrics?.tickResult;
        const runTick = createTickRunner(log, errors, {
          instanceId: runtime.instanceId,
          telemetry,
          ...(tickResult ? { onResult: tickResult } : {}),
        });
        startLoops(dbs, runTick, monitor);
      },
    },
    { name: 'open gate', kind: 'hard', run: () => gate.open() },
  ];

  const closeDatabase = async () => databases?.close();

  const shutdown = createShutdown({
    gate,
    log,
    timeoutMs: config.shutdownTimeoutMs,
    exit: runtime.exit,
    stages: [
      { name: 'stop loops', run: () => loops.stop() },
      // The last runs' health records and pings, each bounded by its own timeout.
      { name: 'settle tick reports', run: () => monitor?.idle() ?? Promise.resolve() },
      // Keep serving (readiness says draining) so a load balancer can take us out of rotation first.
      { name: 'drain delay', run: () => new Promise((done) => setTimeout(done, config.shutdownDelayMs)) },
      {
        name: 'drain http',
        run: async (budget) => {
          await Promise.all([listener?.close(budget), internalListener?.close(budget)]);
          // What the requests left running (c.var.waitUntil) still needs the database.
          while (background.size > 0) await Promise.allSettled([...background]);
        },
      },
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
