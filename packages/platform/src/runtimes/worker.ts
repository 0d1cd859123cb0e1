import type { Hono } from 'hono';
import { asHyperdriveBinding } from '../db/drivers/hyperdrive-binding.js';
import { FailoverEpisodes } from '../db/episode.js';
import { DatabaseHandle } from '../db/handle.js';
import { poisonReason } from '../db/poison.js';
import type { Release } from '../db/releases.js';
import { RELEASE_SEEN_EVERY_MS, recordRelease } from '../db/releases.js';
import { releaseOf, requireServableSchema } from '../db/schema-check.js';
import type { DatabaseDriver } from '../db/types.js';
import { errorBody } from '../http/error-body.js';
import { ReadinessGate } from '../http/gate.js';
import { isProbeMethod, LIVENESS_PATHS, liveResponse, methodNotAllowed } from '../http/health.js';
import type { AppEnv, AppInstance, AppModule } from '../http/module.js';
import { requestIdFrom } from '../http/request-telemetry.js';
import { createShell, type ServedScope, type ShellEnv } from '../http/shell.js';
import { observeTickHealth } from '../http/tick-gauges.js';
import { createTickRunner, type TickRunner } from '../jobs/tick.js';
import type { MonitoredTick, TickHealthPolicy } from '../jobs/tick-health.js';
import { loadTickHealthConfig, type TickHealthConfig } from '../jobs/tick-health-config.js';
import { readTickHealth } from '../jobs/tick-health-store.js';
import { intervalMonitorConfig, TickMonitor } from '../jobs/tick-monitor.js';
import { createDatabases, type Databases } from '../lifecycle/databases.js';
import { FollowUpRuns } from '../lifecycle/follow-up-runs.js';
import { observeDatabase } from '../metrics/db-gauges.js';
import { createGaugeRegistry } from '../metrics/gauges.js';
import { createScrapeCache } from '../metrics/scrape-cache.js';
import { loadTelemetryConfig } from '../telemetry/config.js';
import { type Config, ConfigError, type Env, loadAll, loadConfig } from '../util/config.js';
import { errorCode } from '../util/error-chain.js';
import { disabledErrorTracker, type ErrorTracker } from '../util/error-tracking.js';
import { resolveIdentity } from '../util/identity.js';
import { createLogger, type Logger } from '../util/log.js';
import { withLogContext } from '../util/log-context.js';
import { noTelemetry } from '../util/telemetry.js';
import { withTimeout } from '../util/timeout.js';
import { bootCauseOf, IsolateBootError, RetryingBoot } from './worker-boot.js';
import type { Bindings, IsolateDatabase } from './worker-database.js';
import type { IsolateErrorTracking } from './worker-errors.js';

// The isolate lifecycle (Cloudflare Workers; ARCHITECTURE.md, "Workers"). There is no process to boot:
// an isolate's first request builds the app once (configuration, the app module, the HTTP shell, the
// tick runner) and checks what the runtime permits (the schema, the app's registries). Migrations run
// from the deploy command. One boot runs at a time: concurrent first requests await the same one
// (workerd resolves a promise across request contexts: "Implement cross-request context promise
// resolve handling", workerd's crossContextResolveWorks test). A failed boot is retried after a
// back-off, and readiness says why it failed until a retry succeeds.
// An I/O object belongs to the request that made it, so the database handles (and the write probe that
// holds them) are made per request or cron invocation and closed through waitUntil.

/** The part of a Worker's `ExecutionContext` the platform uses: `waitUntil`. */
export interface ExecutionContextLike {
  waitUntil(promise: Promise<unknown>): void;
}

// Every isolate and cron invocation records its runs (heartbeats, tick health) under one name: on
// Workers the cron trigger, not an isolate, is what runs a tick, and isolates come and go between
// invocations. Leases are the runs' own: the tick runner gives each run a fresh owner under this name.
const WORKER_INSTANCE = 'worker';

/** Built once per isolate, at its first boot. */
interface Isolate<E extends AppEnv> {
  config: Config;
  /** Chosen at the first boot from the bindings; a Worker's bindings do not change under an isolate. */
  database: IsolateDatabase;
  log: Logger;
  errors: ErrorTracker;
  app: AppInstance<E>;
  shell: Hono<ShellEnv>;
  runTick: TickRunner;
  episodes: FailoverEpisodes;
  ticks: MonitoredTick[];
  tickHealth: TickHealthConfig;
  /** No startedAtMs: an isolate's start says nothing about whether the cron fires. */
  tickPolicy: TickHealthPolicy;
  /** This Worker version as the database's record of running releases has it. */
  release: Release;
}

/**
 * What a Worker's entry gives `createIsolateHandlers`: the databases it can reach, and how it reports
 * errors.
 */
export interface IsolateOptions {
  /** The databases this bundle can reach, in order of precedence (worker-database.ts). */
  databases: readonly IsolateDatabase[];
  /** How this bundle reports errors and check-ins (worker-errors.ts); unset: it does not. */
  errorTracking?: IsolateErrorTracking;
}

/**
 * The Worker's `fetch` and `scheduled` handlers for an app module: one build per isolate, a
 * single-flight boot that checks the schema and loads the app's registries (retried with back-off), a
 * database per request or cron run, and the app's ticks on the cron trigger.
 *
 * @example
 * ```ts
 * import { neonIsolateDatabase } from '@honest-health/platform/drivers/neon';
 * import { createIsolateHandlers } from '@honest-health/platform/worker';
 *
 * const { fetch, scheduled } = createIsolateHandlers(app, { databases: [neonIsolateDatabase] });
 * export default { fetch, scheduled };
 * ```
 */
export function createIsolateHandlers<C, E extends AppEnv>(module: AppModule<C, E>, options: IsolateOptions) {
  const gate = new ReadinessGate();
  let built: Isolate<E> | undefined;
  const boots = new RetryingBoot();
  // When each app index last loaded (claimed before the load, so concurrent requests refresh once).
  const registriesLoadedAt = new Map<string, number>();
  const identity = resolveIdentity(module.identity);
  const followUps = new FollowUpRuns();
  const schema = { latestMigrationAt: module.latestMigrationAt, needs: module.schemaNeeds };
  // When this isolate last recorded its release (claimed before the write, as the registries are).
  let releaseSeenAt = 0;
  const seeRelease = (isolate: Isolate<E>, database: DatabaseHandle): Promise<void> => {
    releaseSeenAt = Date.now();
    return recordRelease(database.db, isolate.release).catch((err: unknown) => {
      releaseSeenAt = 0;
      isolate.log.warn('recording the release failed', { reason: errorCode(err) ?? 'error' });
    });
  };

  const openInvocation = async (
    isolate: Pick<Isolate<E>, 'config' | 'database' | 'log' | 'episodes'>,
    bindings: Bindings,
  ): Promise<Databases> => {
    const driver = isolate.database.createDriver(isolate.config, bindings, isolate.log);
    await driver.ready();
    // Handles live per request, the failover episode per isolate: it damps and counts across requests.
    return createDatabases(driver, {
      log: isolate.log,
      telemetry: noTelemetry,
      probeTimeoutMs: isolate.config.probeTimeoutMs,
      instanceId: WORKER_INSTANCE,
      episodes: isolate.episodes,
    });
  };

  const build = async (bindings: Bindings): Promise<Isolate<E>> => {
    const env = stringBindings(bindings);
    const chosen = chooseDatabase(options.databases, bindings);
    const [config, appConfig, tickHealth] = loadAll<[Config, C, TickHealthConfig]>(
      () => loadConfig({ ...chosen.found.defaults, ...env, ...chosen.found.overrides }),
      () => module.loadConfig(env),
      () => loadTickHealthConfig(env, module.tickNames),
    );
    const log = createLogger(config.logLevel, {}, undefined, poisonReason);
    const { database } = chosen;
    log.info('isolate database', { database: database.name });
    for (const warning of database.warnings?.(bindings) ?? []) log.warn(warning, { database: database.name });
    if (database.name !== 'hyperdrive' && Object.values(bindings).some((b) => asHyperdriveBinding(b))) {
      log.warn('a Hyperdrive binding is bound, but this bundle reaches the database through DATABASE_URL', {
        database: database.name,
      });
    }
    const errors = options.errorTracking
      ? await options.errorTracking.create(env).catch(() => disabledErrorTracker)
      : disabledErrorTracker;
    if (config.sentryDsn && options.errorTracking?.name !== 'sentry') {
      log.warn(
        options.errorTracking?.name === 'tail'
          ? "SENTRY_DSN is not read here: it is the errors Tail Worker's secret (ERROR_REPORTS=tail sends reports there)"
          : 'SENTRY_DSN is set, but this bundle reports no errors: it was built without errorTracking',
      );
    }
    const telemetry = loadTelemetryConfig(env, identity);
    for (const problem of tickHealth.warnings) log.warn('tick heartbeat misconfigured', { problem });
    if (telemetry.tracesEndpoint) {
      log.warn('OTEL_EXPORTER_OTLP_ENDPOINT is not used on Workers: enable Workers tracing in wrangler.toml');
    }
    const app = await module.create(appConfig, {
      lifecycle: 'isolate',
      instanceId: WORKER_INSTANCE,
      log,
      embedded: false,
    });
    const ticks = app.ticks.map(({ name, intervalMs }) => ({ name, intervalMs }));
    const tickPolicy = tickHealth.policy;
    // Per isolate, so the scrapes an isolate serves share their database readings.
    const scrapeCache = createScrapeCache();
    // A Worker is public on its route and has no second port: METRICS_TOKEN is the only guard. Without
    // it the internal endpoints are not served (404), unless METRICS_PUBLIC=true asks for them open.
    const internalServed = telemetry.metricsToken !== undefined || env.METRICS_PUBLIC === 'true';
    if (!internalServed) {
      log.warn('/metrics and /healthz/ticks are off: set METRICS_TOKEN (or METRICS_PUBLIC=true)');
    }
    const shell = createShell({
      app,
      gate,
      log,
      errors,
      telemetry: noTelemetry,
      internalEndpoints: internalServed ? 'here' : 'elsewhere',
      clientIpHeader: config.clientIpHeader,
      metrics: {
        token: telemetry.metricsToken,
        render: async (scope) => {
          const appReads = (await scope.cachedDatabase?.()) ?? scope.database;
          // The gauges that mean something without a long-lived process, read through this request.
          const gauges = createGaugeRegistry((metric, err) =>
            log.warn('metrics collector failed', { metric, err }),
          );
          observeDatabase(gauges, scope.writeProbe, identity.metricPrefix);
          // The app's gauges are the reads whose staleness is harmless: a query cache may answer them.
          app.metrics?.gauges?.(gauges, {
            database: appReads,
            cache: scrapeCache,
            timeoutMs: config.probeTimeoutMs,
          });
          observeTickHealth(gauges, identity.metricPrefix, ticks, tickPolicy, () =>
            scrapeCache('tick health', () =>
              withTimeout(readTickHealth(scope.database.pool), config.probeTimeoutMs, 'tick health'),
            ),
          );
          return gauges.render();
        },
      },
      tickHealth: {
        ticks,
        policy: tickPolicy,
        token: telemetry.metricsToken,
        timeoutMs: config.probeTimeoutMs,
        log,
      },
    });
    return {
      config,
      database,
      log,
      errors,
      app,
      shell,
      runTick: createTickRunner(log, errors, { instanceId: WORKER_INSTANCE }),
      episodes: new FailoverEpisodes(log),
      ticks,
      tickHealth,
      tickPolicy,
      release: releaseOf(schema, 'workers', config.releaseId ?? versionId(bindings)),
    };
  };

  // What readiness needs before the isolate serves: the schema the bundle expects, and the app's registries.
  const check = async (isolate: Isolate<E>, bindings: Bindings): Promise<void> => {
    let invocation: Databases;
    try {
      invocation = await withTimeout(
        openInvocation(isolate, bindings),
        isolate.config.probeTimeoutMs,
        'connecting',
      );
    } catch (err) {
      throw bootCauseOf(err);
    }
    try {
      // A schema ahead of this version by expand migrations serves (a newer version migrated first, or
      // this one is a rollback); one a contract took something from that this version needs does not.
      await withTimeout(
        requireServableSchema(invocation.appDatabase.pool, schema, isolate.log),
        isolate.config.probeTimeoutMs,
        'checking the schema',
      ).catch((err: unknown) => {
        throw bootCauseOf(err);
      });
      const seen = seeRelease(isolate, invocation.appDatabase);
      for (const registry of isolate.app.registries) {
        await registry.load(invocation.appDatabase.db).catch((err: unknown) => {
          throw bootCauseOf(err);
        });
        registriesLoadedAt.set(registry.name, Date.now());
      }
      await seen;
    } finally {
      await invocation.close();
    }
  };

  const boot = async (bindings: Bindings): Promise<Isolate<E> | undefined> => {
    const booted = await boots.run(
      async () => {
        if (!built) {
          built = await build(bindings).catch((err: unknown) => {
            throw new IsolateBootError('configuration', err instanceof Error ? err.message : String(err), {
              cause: err,
            });
          });
        }
        await check(built, bindings);
        gate.open();
        built.log.info('isolate booted', { attempt: boots.attempts });
      },
      (err, retryInMs) => {
        gate.fail();
        (built?.log ?? createLogger('info', {}, undefined, poisonReason)).error('isolate boot failed', {
          err,
          cause: err.bootCause,
          retry_in_ms: retryInMs,
        });
      },
    );
    return booted ? built : undefined;
  };

  const tickMonitor = (isolate: Isolate<E>, database: DatabaseHandle, cron?: string) =>
    new TickMonitor({
      database,
      instanceId: WORKER_INSTANCE,
      log: isolate.log,
      errors: isolate.errors,
      heartbeats: isolate.tickHealth.heartbeats,
      monitorConfig: (tick) =>
        intervalMonitorConfig(
          isolate.ticks.find((t) => t.name === tick)?.intervalMs ?? 60_000,
          isolate.tickPolicy.intervals,
          isolate.tickPolicy.failures,
          cron ? { type: 'crontab', value: cron } : undefined,
        ),
      timeoutMs: isolate.config.probeTimeoutMs,
    });

  const notBooted = (path: string, verbose: boolean): Response => {
    const failure = boots.failure;
    const cause = failure?.cause;
    if (path === '/readyz') {
      return Response.json(
        {
          status: 'unavailable',
          checks: {
            boot: gate.state,
            database: cause === 'configuration' ? 'not_checked' : (cause ?? 'unreachable'),
          },
          ...(verbose && failure ? { reason: failure.reason } : {}),
        },
        { status: 503, headers: { 'cache-control': 'no-store' } },
      );
    }
    return Response.json(errorBody('not_ready', 'the service failed to start; retry shortly'), {
      status: 503,
      headers: {
        'retry-after': String(Math.ceil(((failure?.retryAt ?? Date.now()) - Date.now()) / 1000) || 1),
      },
    });
  };

  const serve = async (
    request: Request,
    bindings: Bindings,
    ctx: ExecutionContextLike,
  ): Promise<Response> => {
    const isolate = await boot(bindings);
    if (!isolate) {
      const url = new URL(request.url);
      return notBooted(url.pathname, url.searchParams.has('verbose'));
    }
    const invocation = await openInvocation(isolate, bindings);
    const background: Promise<unknown>[] = [];
    // Built on first use (a scrape), closed with the request's own.
    let cached: { handle: DatabaseHandle; driver: DatabaseDriver } | undefined;
    const cachedDatabase = async () => {
      if (cached) return cached.handle;
      const driver = isolate.database.createCachedDriver?.(isolate.config, bindings, isolate.log);
      if (!driver) return invocation.appDatabase;
      cached = {
        handle: new DatabaseHandle(driver, 'app', isolate.log, noTelemetry, isolate.episodes),
        driver,
      };
      await driver.ready();
      return cached.handle;
    };
    // Once the answer is out, background work is handed to the runtime directly.
    let answered = false;
    let monitor: TickMonitor | undefined;
    const scope: ServedScope = {
      database: invocation.appDatabase,
      probeDatabase: invocation.probeDatabase,
      writeProbe: invocation.writeProbe,
      cachedDatabase,
      schedule: (name) => {
        const tick = isolate.app.ticks.find((t) => t.name === name);
        if (!tick) return;
        monitor ??= tickMonitor(isolate, invocation.appDatabase);
        const target = { database: invocation.appDatabase, monitor };
        background.push(followUps.schedule(tick.name, () => isolate.runTick(tick.name, tick.run, target)));
      },
      // Settled before the request's database closes, so the work may still use it.
      waitUntil: (work) => {
        if (answered) ctx.waitUntil(work);
        else background.push(work);
      },
    };
    try {
      // A failed refresh keeps the state it had (readiness and the request itself report the database).
      const due = isolate.app.registries.filter(
        (registry) =>
          registry.refreshMs !== undefined &&
          Date.now() - (registriesLoadedAt.get(registry.name) ?? 0) > registry.refreshMs,
      );
      if (due.length > 0) {
        for (const registry of due) registriesLoadedAt.set(registry.name, Date.now());
        for (const registry of due) {
          await registry
            .load(invocation.appDatabase.db)
            .catch((err: unknown) =>
              isolate.log.warn(`${registry.name} refresh failed`, { reason: errorCode(err) ?? 'error' }),
            );
        }
      }
      if (Date.now() - releaseSeenAt > RELEASE_SEEN_EVERY_MS)
        background.push(seeRelease(isolate, invocation.appDatabase));
      return await isolate.shell.fetch(request, scope);
    } finally {
      answered = true;
      ctx.waitUntil(
        Promise.allSettled(background)
          .then(() => monitor?.idle())
          .then(() => invocation.close())
          .then(async () => {
            await cached?.handle.close();
            await cached?.driver.close();
          })
          .then(() => isolate.errors.flush(2000)),
      );
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
    const liveness = LIVENESS_PATHS.has(path);
    if (liveness && isProbeMethod(request.method)) return liveResponse(request.method);
    const requestId = requestIdFrom(request.headers);
    return withLogContext({ request_id: requestId }, async () => {
      // A wrong method on liveness is answered without a boot, as liveness itself is.
      const response = liveness ? methodNotAllowed() : await serve(request, bindings, ctx);
      response.headers.set('x-request-id', requestId);
      return response;
    });
  };

  const scheduled = async (
    controller: { cron?: string } | undefined,
    bindings: Bindings,
    ctx: ExecutionContextLike,
  ): Promise<void> => {
    const isolate = await boot(bindings);
    if (!isolate || isolate.app.ticks.length === 0) return;
    const invocation = await openInvocation(isolate, bindings);
    // Sentry's monitor gets the trigger's own crontab: the schedule a missed invocation is measured by.
    const cron = typeof controller?.cron === 'string' && controller.cron ? controller.cron : undefined;
    const monitor = tickMonitor(isolate, invocation.appDatabase, cron);
    const work = (async () => {
      if (Date.now() - releaseSeenAt > RELEASE_SEEN_EVERY_MS)
        await seeRelease(isolate, invocation.appDatabase);
      // In the app's order (it lists token refresh first: a push with an expired token is only deferred).
      // Each waits for the same tick's run in flight here (a request's, which may have claimed before
      // this cron fired) rather than being skipped for it: the next cron may be a minute away.
      for (const tick of isolate.app.ticks) {
        await followUps.scheduleOwn(tick.name, () =>
          isolate.runTick(tick.name, tick.run, { database: invocation.appDatabase, monitor }),
        );
      }
    })()
      .finally(() => monitor.idle())
      .finally(() => invocation.close())
      // Check-ins and crash reports are queued in the SDK: deliver them before the invocation ends.
      .finally(() => isolate.errors.flush(2000));
    ctx.waitUntil(work);
    await work;
  };

  return { fetch, scheduled };
}

/** The first database whose bindings are present. */
function chooseDatabase(
  databases: readonly IsolateDatabase[],
  bindings: Bindings,
): { database: IsolateDatabase; found: NonNullable<ReturnType<IsolateDatabase['detect']>> } {
  for (const database of databases) {
    const found = database.detect(bindings);
    if (found) return { database, found };
  }
  const names = databases.map((d) => d.name).join(', ') || 'none';
  throw new ConfigError([`no database binding for this Worker (it can reach: ${names})`]);
}

/**
 * The Worker version's id, from the version metadata binding, bound as Cloudflare's docs name it
 * (wrangler.toml: `[version_metadata] binding = "CF_VERSION_METADATA"`).
 */
function versionId(bindings: Bindings): string | undefined {
  const metadata = bindings.CF_VERSION_METADATA;
  const id =
    typeof metadata === 'object' && metadata !== null ? (metadata as { id?: unknown }).id : undefined;
  return typeof id === 'string' && id !== '' ? `worker-${id}` : undefined;
}

/** Worker bindings hold strings (vars, secrets) and objects (KV, ...); configuration reads the strings. */
function stringBindings(bindings: Bindings): Env {
  return Object.fromEntries(
    Object.entries(bindings).filter((e): e is [string, string] => typeof e[1] === 'string'),
  );
}
