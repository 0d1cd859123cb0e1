// What the operator's commands (cli/org.ts, cli/migrate.ts) share: a usage error is one line on
// stderr and exit 2; any other failure is one line and exit 1; never a stack trace.

import { type Config, ConfigError, type DatabasePool, type Logger } from '@honest-health/platform';
import { DatabaseLockedError } from '@honest-health/platform/drivers/pglite';
import { openDriver } from '../src/app/databases.js';

export const EXIT_USAGE = 2;
export const EXIT_FAILURE = 1;

export class UsageError extends Error {
  override name = 'UsageError';
}

/** node:util parseArgs rejects unknown options, missing values and stray arguments with these codes. */
export function isParseArgsError(err: unknown): err is Error {
  const code = err instanceof Error ? (err as NodeJS.ErrnoException).code : undefined;
  return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS');
}

export async function runCli(name: string, usage: string, main: () => Promise<void>): Promise<void> {
  try {
    await main();
  } catch (err) {
    if (err instanceof UsageError || isParseArgsError(err)) {
      process.stderr.write(`${name}: ${err.message}; ${usage}\n`);
      process.exitCode = EXIT_USAGE;
      return;
    }
    const message =
      err instanceof ConfigError || err instanceof DatabaseLockedError
        ? err.message
        : `failed: ${err instanceof Error ? err.message : String(err)}`;
    process.stderr.write(`${name}: ${message.replace(/\s*\n\s*/g, ' ')}\n`);
    process.exitCode = EXIT_FAILURE;
  }
}

/** Runs `work` on the configured database's app pool, then ends the pool and the driver either way. */
export async function withAppPool<T>(
  config: Config,
  log: Logger,
  work: (pool: DatabasePool) => Promise<T>,
): Promise<T> {
  const driver = openDriver(config, log);
  try {
    await driver.ready();
    const pool = driver.createPool('app');
    try {
      return await work(pool);
    } finally {
      await pool.end();
    }
  } finally {
    await driver.close();
  }
}
