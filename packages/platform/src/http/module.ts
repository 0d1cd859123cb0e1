import type { Context, Hono } from 'hono';
import type { DatabaseHandle } from '../db/handle.js';
import type { Migration } from '../db/migrate.js';
import type { Database } from '../db/types.js';
import type { TickRun } from '../jobs/tick.js';
import type { GaugeRegistry, MetricsRegistry } from '../metrics/registry.js';
import type { ScrapeCache } from '../metrics/scrape-cache.js';
import type { Env } from '../util/config.js';
import type { AppIdentity } from '../util/identity.js';
import type { Logger } from '../util/log.js';

// The contract between the platform and an app (ARCHITECTURE.md, "Platform and app"). The platform owns
// every lifecycle: boot order, shutdown, the scheduler, the readiness gate and probe, the database
// handles. The app supplies this module: its configuration, migrations, routes, ticks and metrics.

/** What the app's handlers find in the context (`c.var`), whatever the runtime. */
export type RequestScope = {
  /** This request's database: the process's handle on Node and Bun, one per request on Workers. */
  database: DatabaseHandle;
  /**
   * Runs a tick soon, off the request: the scheduler's loop at once on Node and Bun, the request's
   * waitUntil on Workers. A name the app does not run is ignored.
   */
  schedule(tick: string): void;
  /**
   * Keeps `work` going after the answer is sent: the request's `waitUntil` on Workers (which may
   * otherwise cancel it), awaited by shutdown before the database closes on Node and Bun. Every
   * background promise of a route goes here; a rejection is logged.
   */
  waitUntil(work: Promise<unknown>): void;
  /**
   * Runs `fn` on the request's database, and once more on a fresh pool when a failover poisoned the
   * first: for reads and idempotent writes. A second failure answers 503 database_unavailable.
   */
  withDatabase<T>(fn: (db: Database) => Promise<T>): Promise<T>;
  /**
   * The client's address: from CLIENT_IP_HEADER when that proxy is trusted, else the socket's peer;
   * undefined when neither is known (a Worker without the header configured).
   */
  clientIp: string | undefined;
};

/** The Hono environment of an app's routes: the request's scope in `c.var`. */
export type AppEnv = { Variables: RequestScope };

/**
 * Work the platform runs on an interval (Node, Bun) or a cron trigger (Workers): never overlapping
 * itself in a process, once more on a fresh pool after a failover, with a health record per run.
 * Across replicas it must claim its work in the database (one `UPDATE ... RETURNING`), leased to
 * `run.owner`: fresh for each run, so no run ever takes a lease another still holds.
 *
 * @example
 * ```ts
 * const expire: AppTick = {
 *   name: 'expire-carts',
 *   intervalMs: 60_000,
 *   run: (db) => db.execute(sql`DELETE FROM carts WHERE expires_at < now()`),
 * };
 * ```
 */
export interface AppTick {
  name: string;
  intervalMs: number;
  run(db: Database, run: TickRun): Promise<unknown>;
}

/**
 * In-memory state read from the database (the API-key registry): loaded by a hard boot step, so a server
 * that cannot authenticate anyone never reports ready, and reloaded every `refreshMs`.
 */
export interface AppRegistry {
  /** Names the boot step: `load <name>`. */
  name: string;
  /** How often to reload: on an interval in a process, on a request that long after the last load on Workers. Absent: only at boot. */
  refreshMs?: number;
  load(db: Database): Promise<void>;
}

/** What the platform gives an app module's `create`: the lifecycle, the instance, the logger. */
export interface AppContext {
  lifecycle: 'process' | 'isolate';
  /**
   * This replica; on Workers one name for every isolate and invocation (the schedule's, for heartbeats
   * and tick health). Never a lease owner: each tick run gets its own (`TickRun.owner`).
   */
  instanceId: string;
  log: Logger;
  /** The embedded database (PGlite): development defaults for secrets are allowed. */
  embedded: boolean;
}

/** What the metrics boot step hands the app, to register the gauges and counters of its own. */
export interface AppMetricsContext {
  /**
   * The application's handle, never the probe's: the probe pool's 2 connections are readiness's, and
   * a flood of scrapes must not queue ahead of it. Read through `cache`, bounded by `timeoutMs`.
   */
  database: DatabaseHandle;
  /** Shares a reading among the scrapes of a few seconds (platform/metrics/scrape-cache.ts). */
  cache: ScrapeCache;
  timeoutMs: number;
}

/** The app's own metrics: gauges read at scrape time, counters for long-lived processes. */
export interface AppMetrics {
  /** Gauges read at scrape time: served by processes and Workers alike. */
  gauges?(registry: GaugeRegistry, context: AppMetricsContext): void;
  /**
   * Counters of a long-lived process (prom-client; Workers keep none). Returns what sees each
   * successful tick run's result.
   */
  counters?(registry: MetricsRegistry): { tickResult(tick: string, result: unknown): void };
}

/** One app, built once per process or isolate. `E`: the app's routes may add variables of their own. */
export interface AppInstance<E extends AppEnv = AppEnv> {
  /** Mounted at `/`, after the platform's own routes (liveness, readiness, /metrics, /healthz/ticks). */
  routes: Hono<E>;
  /** The app's answer to an error of its own; undefined leaves it to the platform (503 or 500). */
  onError?(err: Error, c: Context): Response | undefined;
  /** The ticks this configuration runs (none, when what they need is not configured). */
  ticks: readonly AppTick[];
  registries: readonly AppRegistry[];
  metrics?: AppMetrics;
}

/**
 * An app as the platform runs it: its configuration, ticks, migrations' newest timestamp, and how to
 * build it once per process or isolate.
 *
 * @example
 * ```ts
 * export const shop: AppModule<ShopConfig> = {
 *   identity: { name: 'shop' },
 *   loadConfig: loadShopConfig,
 *   tickNames: ['expire-carts'],
 *   latestMigrationAt,
 *   create: async (config, { log }) => ({
 *     routes: new Hono<AppEnv>().get('/carts/:id', (c) => c.var.withDatabase((db) => readCart(db, c.req.param('id')))),
 *     ticks: [{ name: 'expire-carts', intervalMs: 60_000, run: (db) => expireCarts(db) }],
 *     registries: [],
 *   }),
 * };
 * ```
 */
export interface AppModule<C = unknown, E extends AppEnv = AppEnv> {
  /** The names operators see: metric prefix, service and tracer, application_name. Default `app`. */
  identity?: AppIdentity;
  /** Reads the app's variables; throws ConfigError naming each bad one (reported with the platform's). */
  loadConfig(env: Env): C;
  /** Every tick the app may run, enabled or not: their heartbeat variables are read by name. */
  tickNames: readonly string[];
  /**
   * The newest bundled migration's timestamp: a release serves on a database at it, or ahead of it by
   * migrations that remove nothing in `schemaNeeds` (schema-check.ts).
   */
  latestMigrationAt: number;
  /**
   * Every column the app reads or writes, as `table.column` (the bundle's `schemaNeeds`). Unset: any
   * contract migration newer than this release stops it.
   */
  schemaNeeds?: readonly string[];
  create(config: C, context: AppContext): Promise<AppInstance<E>>;
}

/**
 * What a long-lived process (Node, Bun) runs: the app module with the migrations it applies at boot.
 * Apart from AppModule so that an isolate's bundle, which only checks the schema, leaves the migrations'
 * SQL out.
 */
export interface ProcessAppModule<C = unknown, E extends AppEnv = AppEnv> extends AppModule<C, E> {
  migrations: readonly Migration[];
}
