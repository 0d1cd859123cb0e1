// What the operator's commands (cli/org.ts, cli/migrate.ts) share: a usage error is one line on
// stderr and exit 2; any other failure is one line and exit 1; never a stack trace.

import { ConfigError } from '@honest-health/platform';
import { DatabaseLockedError } from '@honest-health/platform/drivers/pglite';

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
