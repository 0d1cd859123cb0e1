// `npm run org:create -- --name "Acme" [--allow-duplicate]`: creates an organization and prints its
// API key once, as JSON. `npm run org:list`: every organization (no keys), as JSON.
// `npm run org:remove -- --id <uuid>`.
// Keys: `npm run org:key:create -- --org <uuid> --name "ci"` prints the new key once, as JSON;
// `npm run org:key:list [-- --org <uuid>]` lists keys (never a key or its hash);
// `npm run org:key:revoke -- --id <key uuid> [--allow-last]` revokes one (refusing the organization's
// last active key unless --allow-last; no other row changes). Uses the same DATABASE_URL (and migrations) as the server;
// running servers pick the change up within API_KEY_REFRESH_MS. On the embedded database these
// refuse to run while a server holds it (one process at a time can open PGlite).
// Exit codes: 0 done, 1 failed (or nothing removed, or a duplicate name), 2 usage.
import { parseArgs } from 'node:util';
import type { Database } from '@honest-health/platform';
import { createLogger, loadConfig } from '@honest-health/platform';
import { migrate } from '@honest-health/platform/db';
import { createApiKey, listApiKeys, revokeApiKey } from '../src/app/api-keys.js';
import { migrations } from '../src/app/migrations.gen.js';
import {
  createOrganization,
  listOrganizations,
  organizationsNamed,
  removeOrganization,
} from '../src/app/organizations.js';
import { EXIT_FAILURE, runCli, UsageError, withAppPool } from './cli.js';

const USAGE =
  'usage: npm run org:create -- --name "Acme" [--allow-duplicate] | npm run org:list | npm run org:remove -- --id <uuid>' +
  ' | npm run org:key:create -- --org <uuid> --name "ci" | npm run org:key:list [-- --org <uuid>]' +
  ' | npm run org:key:revoke -- --id <key uuid> [--allow-last]';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type Command = (db: Database) => Promise<void>;

function parse(argv: string[]): Command {
  const [command, ...args] = argv;
  if (command === 'create') {
    const { values } = parseArgs({
      args,
      strict: true,
      options: { name: { type: 'string' }, 'allow-duplicate': { type: 'boolean' } },
    });
    const name = values.name?.trim();
    if (!name) throw new UsageError('--name is required and must not be blank');
    if (name.length > 255) throw new UsageError('--name must be at most 255 characters');
    return async (db) => {
      const same = await organizationsNamed(db, name);
      if (same.length > 0 && !values['allow-duplicate']) {
        process.stderr.write(
          `org:create: an organization named "${name}" already exists (id ${same.map((o) => o.id).join(', ')}); ` +
            'pass --allow-duplicate to create another\n',
        );
        process.exitCode = EXIT_FAILURE;
        return;
      }
      console.log(JSON.stringify(await createOrganization(db, name)));
    };
  }
  if (command === 'list') {
    parseArgs({ args, strict: true, options: {} });
    return async (db) => console.log(JSON.stringify(await listOrganizations(db)));
  }
  if (command === 'remove') {
    const { values } = parseArgs({ args, strict: true, options: { id: { type: 'string' } } });
    const id = values.id;
    if (id === undefined) throw new UsageError('--id is required');
    if (!UUID.test(id))
      throw new UsageError(`--id must be an organization id (a UUID), not "${id.slice(0, 40)}"`);
    return async (db) => {
      const removed = await removeOrganization(db, id);
      console.log(JSON.stringify({ id, removed }));
      if (!removed) process.exitCode = EXIT_FAILURE;
    };
  }
  if (command === 'key-create') {
    const { values } = parseArgs({
      args,
      strict: true,
      options: { org: { type: 'string' }, name: { type: 'string' } },
    });
    const org = uuidOption('--org', values.org);
    const name = values.name?.trim();
    if (!name) throw new UsageError('--name is required and must not be blank');
    if (name.length > 255) throw new UsageError('--name must be at most 255 characters');
    return async (db) => {
      const key = await createApiKey(db, org, name);
      if (!key) return fail(`org:key:create: no organization has id ${org}`);
      console.log(JSON.stringify(key));
    };
  }
  if (command === 'key-list') {
    const { values } = parseArgs({ args, strict: true, options: { org: { type: 'string' } } });
    const org = values.org === undefined ? undefined : uuidOption('--org', values.org);
    return async (db) => console.log(JSON.stringify(await listApiKeys(db, org)));
  }
  if (command === 'key-revoke') {
    const { values } = parseArgs({
      args,
      strict: true,
      options: { id: { type: 'string' }, 'allow-last': { type: 'boolean' } },
    });
    const id = uuidOption('--id', values.id);
    return async (db) => {
      const outcome = await revokeApiKey(db, id, values['allow-last'] === true);
      if (outcome.kind === 'not_found') return fail(`org:key:revoke: no API key has id ${id}`);
      if (outcome.kind === 'last_key') {
        return fail(
          `org:key:revoke: ${id} is the last active key of organization ${outcome.organizationId}; ` +
            'create another first (org:key:create), or pass --allow-last to lock the organization out',
        );
      }
      console.log(
        JSON.stringify({
          id,
          revoked: outcome.kind === 'revoked',
          revokedAt: outcome.revokedAt,
        }),
      );
    };
  }
  throw new UsageError(command === undefined ? 'no command' : `unknown command "${command}"`);
}

function uuidOption(flag: string, value: string | undefined): string {
  if (value === undefined) throw new UsageError(`${flag} is required`);
  if (!UUID.test(value)) throw new UsageError(`${flag} must be a UUID, not "${value.slice(0, 40)}"`);
  return value;
}

function fail(line: string): void {
  process.stderr.write(`${line}\n`);
  process.exitCode = EXIT_FAILURE;
}

await runCli('org', USAGE, async () => {
  // Arguments first: a usage error never touches the database.
  const run = parse(process.argv.slice(2));
  const config = loadConfig(process.env);
  const log = createLogger('warn');
  await withAppPool(config, log, async (pool) => {
    await migrate(pool, migrations, log);
    await run(pool.db);
  });
});
