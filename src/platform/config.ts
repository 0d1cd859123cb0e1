import { z } from 'zod';
import type { LogLevel } from './log.js';

// Environment -> typed configuration. Every bad variable is reported in one message, and messages
// never include the value: a mistyped DATABASE_URL still holds a password.

export type DatabaseConfig = { driver: 'pglite'; dataDir: string } | { driver: 'pg'; url: string };

export interface Config {
  port: number;
  host: string;
  database: DatabaseConfig;
  poolMax: number;
  poolMaxLifetimeSeconds: number;
  probeTimeoutMs: number;
  shutdownTimeoutMs: number;
  shutdownDelayMs: number;
  logLevel: LogLevel;
  sentryDsn: string | undefined;
}

export const DEFAULT_PGLITE_DIR = '.data/pglite';

const int = (min: number, max: number, fallback: number) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined) return fallback;
      const n = /^\d+$/.test(v) ? Number(v) : Number.NaN;
      if (!Number.isSafeInteger(n) || n < min || n > max) {
        ctx.addIssue({ code: 'custom', message: `must be an integer from ${min} to ${max}` });
        return z.NEVER;
      }
      return n;
    });

const databaseUrl = z
  .string()
  .optional()
  .transform((v, ctx): DatabaseConfig => {
    if (v === undefined) return { driver: 'pglite', dataDir: DEFAULT_PGLITE_DIR };
    if (v === 'memory://') return { driver: 'pglite', dataDir: v };
    if (/^postgres(ql)?:\/\//.test(v) && URL.canParse(v)) return { driver: 'pg', url: v };
    ctx.addIssue({ code: 'custom', message: 'must be unset, memory:// or a postgres:// URL' });
    return z.NEVER;
  });

const envSchema = z.object({
  PORT: int(0, 65535, 8080),
  HOST: z.string().optional().default('0.0.0.0'),
  DATABASE_URL: databaseUrl,
  POOL_MAX: int(1, 1000, 10),
  POOL_MAX_LIFETIME_S: int(1, 86_400, 300),
  PROBE_TIMEOUT_MS: int(50, 60_000, 2000),
  SHUTDOWN_TIMEOUT_MS: int(0, 600_000, 25_000),
  SHUTDOWN_DELAY_MS: int(0, 600_000, 0),
  LOG_LEVEL: z
    .enum(['debug', 'info', 'warn', 'error'], { error: () => 'must be one of debug, info, warn, error' })
    .optional()
    .default('info'),
  // A malformed DSN is not a configuration error: error tracking is advisory and its boot step warns.
  SENTRY_DSN: z.string().optional(),
});

export class ConfigError extends Error {
  override name = 'ConfigError';
  constructor(readonly problems: string[]) {
    super(`invalid configuration: ${problems.join('; ')}`);
  }
}

export function loadConfig(env: Record<string, string | undefined>): Config {
  // An empty variable means unset: container platforms often export `FOO=` for absent values.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${i.path.join('.')} ${i.message}`));
  }
  const e = parsed.data;
  return {
    port: e.PORT,
    host: e.HOST,
    database: e.DATABASE_URL,
    poolMax: e.POOL_MAX,
    poolMaxLifetimeSeconds: e.POOL_MAX_LIFETIME_S,
    probeTimeoutMs: e.PROBE_TIMEOUT_MS,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    shutdownDelayMs: e.SHUTDOWN_DELAY_MS,
    logLevel: e.LOG_LEVEL,
    sentryDsn: e.SENTRY_DSN,
  };
}
