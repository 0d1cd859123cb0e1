// `npm run tokens:reseal [-- --batch-size 100]`: re-seals every stored Xero token under the current
// TOKEN_ENCRYPTION_KEY, opening them with it or a key in TOKEN_ENCRYPTION_KEYS_PREVIOUS. The step of a
// key rotation between "every server has both keys" and "drop the old key" (docs/configuration.md#rotating-token_encryption_key).
// Safe beside running servers (a row a refresh changed meanwhile is read again, never overwritten)
// and to run again (rows already under the key are skipped). On the embedded database it refuses to
// run while a server holds it, like the other commands. Prints one JSON line of counts.
// Exit codes: 0 every row is under the current key, 1 failed or some rows still are not (unreadable
// or busy: the old key must stay), 2 usage.
import { parseArgs } from 'node:util';
import { ConfigError, createLogger, loadConfig } from '@honest-health/platform';
import { createSecretBox } from '@honest-health/platform/crypto';
import { loadAppConfig } from '../src/app/config.js';
import { resealGrantTokens } from '../src/app/connections/reseal.js';
import { EXIT_FAILURE, runCli, UsageError, withAppPool } from './cli.js';

const USAGE = 'usage: npm run tokens:reseal [-- --batch-size <1-1000>]';

await runCli('tokens', USAGE, async () => {
  const [command, ...args] = process.argv.slice(2);
  if (command !== 'reseal')
    throw new UsageError(command === undefined ? 'no command' : `unknown command "${command}"`);
  const { values } = parseArgs({ args, strict: true, options: { 'batch-size': { type: 'string' } } });
  const batchSize = Number(values['batch-size'] ?? '100');
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 1000)
    throw new UsageError('--batch-size must be an integer from 1 to 1000');
  const config = loadConfig(process.env);
  const app = loadAppConfig(process.env);
  if (app.tokenEncryptionKey === undefined)
    throw new ConfigError(['TOKEN_ENCRYPTION_KEY is required: it is the key every token is resealed under']);
  const box = await createSecretBox(app.tokenEncryptionKey, app.previousTokenEncryptionKeys);
  const log = createLogger('warn');
  const counts = await withAppPool(config, log, (pool) => resealGrantTokens(pool.db, box, { batchSize }));
  console.log(JSON.stringify({ keyId: box.keyId, ...counts }));
  if (counts.unreadable > 0 || counts.busy > 0) process.exitCode = EXIT_FAILURE;
});
