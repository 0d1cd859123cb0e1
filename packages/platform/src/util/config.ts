import {
  _default,
  object,
  optional,
  type output,
  pipe,
  refine,
  string,
  transform,
  type ZodMiniType,
  enum as zenum,
} from 'zod/mini';
import type { LogLevel } from './log.js';
import { validate } from './validate.js';

// Environment -> typed configuration. Every bad variable is reported in one message, and messages
// never include the value: a mistyped DATABASE_URL still holds a password.

/** The values `DATABASE_DRIVER` takes. */
export const DATABASE_DRIVERS = ['pglite', 'pg', 'neon-http', 'neon-ws'] as const;
/** A driver that reaches a Postgres server over the network (every one but PGlite). */
export type NetworkDriver = Exclude<(typeof DATABASE_DRIVERS)[number], 'pglite'>;

/** The configured database: the embedded PGlite's directory, or a driver and its URL. */
export type DatabaseConfig =
  | { driver: 'pglite'; dataDir: string }
  | { driver: NetworkDriver; url: string; neonLocalProxy?: string };

/** The platform's configuration, read from the environment by `loadConfig`. */
export interface Config {
  port: number;
  host: string;
  database: DatabaseConfig;
  poolMax: number;
  poolMaxLifetimeSeconds: number;
  probeTimeoutMs: number;
  shutdownTimeoutMs: number;
  shutdownDelayMs: number;
  /** How long migrating waits, in all, for the migration lock and the table locks it needs. */
  migrationLockTimeoutMs: number;
  /** The `lock_timeout` of one attempt at a migration statement; it is retried until the above. */
  migrationLockAttemptMs: number;
  /** This release's name in the database's record of running releases; unset: from its schema. */
  releaseId: string | undefined;
  /** A release seen within this window counts as running when a contract migration asks. */
  releaseWindowMs: number;
  /** What sits between us and Postgres (pg driver): `auto` detects a transaction pooler at boot. */
  databasePooler: DatabasePooler;
  logLevel: LogLevel;
  sentryDsn: string | undefined;
  /**
   * The header a trusted proxy puts the client's address in (Fly's, Cloudflare's); unset: the
   * socket's peer. Trusting it anywhere else would let a client name any address it likes.
   */
  clientIpHeader: ClientIpHeader | undefined;
  /** Every statement on the application pool, where sessions last; 0: none (docs/poolers.md). */
  statementTimeoutMs: number;
}

/** The values `CLIENT_IP_HEADER` takes: a trusted proxy's header naming the client. */
export const CLIENT_IP_HEADERS = ['fly-client-ip', 'cf-connecting-ip'] as const;
/** A header a trusted proxy sets to the client's address (CLIENT_IP_HEADER). */
export type ClientIpHeader = (typeof CLIENT_IP_HEADERS)[number];

/** The values `DATABASE_POOLER` takes: `auto` detects a transaction-mode pooler. */
export const DATABASE_POOLERS = ['auto', 'session', 'transaction'] as const;
/** What `DATABASE_POOLER` says sits in front of the database. */
export type DatabasePooler = (typeof DATABASE_POOLERS)[number];

/** Where the embedded PGlite keeps its data without `DATABASE_URL`, under the working directory. */
export const DEFAULT_PGLITE_DIR = '.data/pglite';
/**
 * HOST when unset: every interface, what a container needs, with a database server; loopback with the
 * embedded database, which is for development on this machine (so `npm start` needs no guard on its
 * internal endpoints: platform/http/internal-endpoints.ts).
 */
export const defaultBindHost = (databaseUrl: string | undefined) =>
  databaseUrl === undefined || databaseUrl === '' || databaseUrl === 'memory://' ? '127.0.0.1' : '0.0.0.0';

/** A whole number from `min` to `max` given as decimal digits, `fallback` when unset. */
export const int = <F extends number | undefined>(min: number, max: number, fallback: F) =>
  pipe(
    optional(string()).check(
      // abort: a bad number stops the object's cross-field checks, as classic zod's transform did.
      refine((v) => v === undefined || isIntegerIn(v, min, max), {
        message: `must be an integer from ${min} to ${max}`,
        abort: true,
      }),
    ),
    // Runs only when the check passed: a pipe stops at its first failing side.
    transform((v: string | undefined): number | F => (v === undefined ? fallback : Number(v))),
  );

const isIntegerIn = (v: string, min: number, max: number) => {
  const n = /^\d+$/.test(v) ? Number(v) : Number.NaN;
  return Number.isSafeInteger(n) && n >= min && n <= max;
};

const isPostgresUrl = (v: string) => /^postgres(ql)?:\/\//.test(v) && URL.canParse(v);

const databaseUrl = optional(string()).check(
  refine((v) => v === undefined || v === 'memory://' || isPostgresUrl(v), {
    message: 'must be unset, memory:// or a postgres:// URL',
  }),
);

const localProxyUrl = optional(string()).check(
  refine((v) => v === undefined || (/^https?:\/\//.test(v) && URL.canParse(v)), {
    message: 'must be an http:// URL of the local Neon proxy',
  }),
);

/** One of `values`, `fallback` when unset. */
const oneOf = <const T extends readonly [string, ...string[]]>(values: T, fallback: T[number]) =>
  _default(optional(zenum(values, { error: () => `must be one of ${values.join(', ')}` })), fallback);

const envSchema = object({
  PORT: int(0, 65535, 8080),
  HOST: optional(string()),
  DATABASE_URL: databaseUrl,
  DATABASE_DRIVER: oneOf(['auto', ...DATABASE_DRIVERS], 'auto'),
  NEON_LOCAL_PROXY: localProxyUrl,
  POOL_MAX: int(1, 1000, 10),
  POOL_MAX_LIFETIME_S: int(1, 86_400, 300),
  PROBE_TIMEOUT_MS: int(50, 60_000, 2000),
  SHUTDOWN_TIMEOUT_MS: int(0, 600_000, 25_000),
  SHUTDOWN_DELAY_MS: int(0, 600_000, 0),
  MIGRATION_LOCK_TIMEOUT_MS: int(0, 3_600_000, 120_000),
  MIGRATION_LOCK_ATTEMPT_MS: int(10, 60_000, 500),
  RELEASE_ID: optional(
    string().check(
      refine((v) => /^[\w.:@/+-]{1,200}$/.test(v), {
        message: 'must be 1 to 200 letters, digits or ._:@/+-',
      }),
    ),
  ),
  RELEASE_WINDOW_MS: int(0, 90 * 86_400_000, 86_400_000),
  DATABASE_POOLER: oneOf(DATABASE_POOLERS, 'auto'),
  LOG_LEVEL: oneOf(['debug', 'info', 'warn', 'error'], 'info'),
  // A malformed DSN is not a configuration error: error tracking is advisory and its boot step warns.
  SENTRY_DSN: optional(string()),
  STATEMENT_TIMEOUT_MS: int(0, 3_600_000, 5000),
  CLIENT_IP_HEADER: optional(
    zenum(CLIENT_IP_HEADERS, { error: () => `must be one of ${CLIENT_IP_HEADERS.join(', ')}` }),
  ),
});

/** Invalid configuration: every problem found, each naming its variable (never its value). */
export class ConfigError extends Error {
  override name = 'ConfigError';
  constructor(readonly problems: string[]) {
    super(`invalid configuration: ${problems.join('; ')}`);
  }
}

/** Environment variables by name, as `process.env` or a Worker's bindings hold them. */
export type Env = Record<string, string | undefined>;

/**
 * Parses the environment with a zod object schema; every problem lands in one ConfigError, named by
 * variable and never with its value.
 *
 * @example
 * ```ts
 * // shopSchema: a zod/mini object of the app's variables, each like int(1, 500, 50)
 * export const loadShopConfig = (env: Env) => parseEnv(shopSchema, env);
 * ```
 */
export function parseEnv<S extends ZodMiniType>(
  schema: S,
  env: Env,
  problems: readonly string[] = [],
): output<S> {
  const parsed = validate(schema, present(env));
  const all = [
    ...problems,
    ...(parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')} ${i.message}`)),
  ];
  if (all.length > 0 || !parsed.success) throw new ConfigError(all);
  return parsed.data;
}

// An empty variable means unset: container platforms often export `FOO=` for absent values.
const present = (env: Env): Env =>
  Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));

/** Variables given new names, old name to new: the old one is still read for one release. */
export type RenamedVariables = Readonly<Record<string, string>>;

/** A variable set under its old name: what the operator should rename it to. */
export interface DeprecatedVariable {
  variable: string;
  use: string;
}

/**
 * The environment with each old name's value under its new name. An old name set alone is used and
 * reported in `deprecated` (to log a warning); set beside its new name with another value, it is a
 * problem (for `parseEnv`), since either choice would silently ignore what an operator wrote.
 *
 * @example
 * ```ts
 * const renamed = renameVariables(env, { CART_TTL: 'CART_TTL_MS' });
 * const e = parseEnv(shopSchema, renamed.env, renamed.problems);
 * for (const d of renamed.deprecated) log.warn('deprecated variable', { ...d });
 * ```
 */
export function renameVariables(
  env: Env,
  renamed: RenamedVariables,
): { env: Env; deprecated: DeprecatedVariable[]; problems: string[] } {
  const current = present(env);
  const deprecated: DeprecatedVariable[] = [];
  const problems: string[] = [];
  for (const [variable, use] of Object.entries(renamed)) {
    const old = current[variable];
    if (old === undefined) continue;
    delete current[variable];
    if (current[use] === undefined) current[use] = old;
    else if (current[use] !== old) {
      problems.push(`${variable} is the old name of ${use}, which is set to another value: set only ${use}`);
      continue;
    }
    deprecated.push({ variable, use });
  }
  return { env: current, deprecated, problems };
}

/** Runs every loader and reports the problems of all of them together. */
export function loadAll<T extends unknown[]>(...loaders: { [K in keyof T]: () => T[K] }): T {
  const problems: string[] = [];
  const results = loaders.map((load) => {
    try {
      return load();
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      problems.push(...err.problems);
      return undefined;
    }
  });
  if (problems.length > 0) throw new ConfigError(problems);
  return results as T;
}

/**
 * The platform's configuration (DATABASE_URL, PORT, POOL_MAX, PROBE_TIMEOUT_MS, ...): a lifecycle reads
 * it at boot beside the app's; a tool reads it to open the same database.
 *
 * @example
 * ```ts
 * const config = loadConfig(process.env); // throws ConfigError naming every bad variable
 * ```
 */
export function loadConfig(env: Env): Config {
  const e = parseEnv(envSchema, env);
  const database = databaseConfig(e.DATABASE_URL, e.DATABASE_DRIVER, e.NEON_LOCAL_PROXY);
  if (typeof database === 'string') throw new ConfigError([database]);
  return {
    port: e.PORT,
    host: e.HOST ?? defaultBindHost(e.DATABASE_URL),
    database,
    poolMax: e.POOL_MAX,
    poolMaxLifetimeSeconds: e.POOL_MAX_LIFETIME_S,
    probeTimeoutMs: e.PROBE_TIMEOUT_MS,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    shutdownDelayMs: e.SHUTDOWN_DELAY_MS,
    migrationLockTimeoutMs: e.MIGRATION_LOCK_TIMEOUT_MS,
    migrationLockAttemptMs: e.MIGRATION_LOCK_ATTEMPT_MS,
    releaseId: e.RELEASE_ID,
    releaseWindowMs: e.RELEASE_WINDOW_MS,
    databasePooler: e.DATABASE_POOLER,
    logLevel: e.LOG_LEVEL,
    sentryDsn: e.SENTRY_DSN,
    clientIpHeader: e.CLIENT_IP_HEADER,
    statementTimeoutMs: e.STATEMENT_TIMEOUT_MS,
  };
}

// auto: the embedded database without a URL, node-postgres with one (Workers choose Neon themselves).
function databaseConfig(
  url: string | undefined,
  driver: 'auto' | DatabaseConfig['driver'],
  neonLocalProxy: string | undefined,
): DatabaseConfig | string {
  const embedded = url === undefined || url === 'memory://';
  if (driver === 'auto') driver = embedded ? 'pglite' : 'pg';
  if (driver === 'pglite') {
    return embedded
      ? { driver, dataDir: url ?? DEFAULT_PGLITE_DIR }
      : 'DATABASE_DRIVER pglite takes no postgres:// URL';
  }
  if (embedded) return `DATABASE_DRIVER ${driver} needs a postgres:// DATABASE_URL`;
  return { driver, url, ...(neonLocalProxy ? { neonLocalProxy } : {}) };
}
