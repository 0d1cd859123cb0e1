// The operator's commands as subprocesses: usage errors, org:list, duplicate names, the refusal to
// migrate the embedded database by accident, and the lock that keeps a second process off the
// embedded database a running server holds. Most runs spawn the commands bundled once
// (support/tools-bundle.ts); runs marked `tsx` go the way `npm run org:create` and `npm run db:migrate`
// do (tsx on cli/*.ts), so each command's path through tsx is still covered.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createLogger, loadConfig } from '@honest-health/platform';
import { createSecretBox, generateKeyBase64 } from '@honest-health/platform/crypto';
import { type Migration, migrate, recordRelease, releaseOf } from '@honest-health/platform/db';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDriver } from '../src/app/databases.js';
import { migrations } from '../src/app/migrations.gen.js';
import { freshDatabase } from './support/databases.js';
import { waitForKey } from './support/orgs.js';
import { seedPgliteDir } from './support/pglite-template.js';
import type { Cluster } from './support/postgres.js';
import { repoRoot, spawnServer, tsxArgs } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import { bundleTools, runFile, type ToolRun, type ToolsBundle } from './support/tools-bundle.js';

// The embedded database's lock, by the name the app's identity gives it and earlier releases used.
const LOCK_FILE = 'honest-health.lock';
const tsx = resolve(repoRoot, 'node_modules/.bin/tsx');
const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'cli-'));
  dirs.push(dir);
  return dir;
};
let tools: ToolsBundle;
beforeAll(async () => {
  tools = await bundleTools();
});
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  tools?.remove();
});

function cli(
  tool: 'org' | 'migrate' | 'tokens',
  args: string[],
  options: { cwd?: string; env?: Record<string, string>; tsx?: boolean } = {},
) {
  const run = { cwd: options.cwd ?? tempDir(), env: options.env };
  if (!options.tsx) return tools.run(tool, args, run);
  // The repository's tsconfig from any cwd: its paths resolve the platform to its sources, not the
  // dist/ an install of the package gets.
  const script = resolve(repoRoot, `cli/${tool}.ts`);
  return runFile(tsx, tsxArgs(script, ...args), run);
}

/** One line on stderr, no stack trace. */
function expectOneLine(run: ToolRun, pattern: RegExp) {
  const lines = run.stderr.trimEnd().split('\n');
  expect(lines, run.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
  expect(run.stderr).not.toMatch(/\n\s+at /);
}

// Each run has a directory of its own and touches no database: they run side by side.
describe.concurrent('usage errors', () => {
  it.each([
    [['create'], /--name is required/],
    [['create', '--name'], /--name <value>' argument missing/],
    [['create', '--name', '   '], /--name is required/],
    [['create', '--nme', 'Acme'], /Unknown option '--nme'/],
    [['remove'], /--id is required/],
    [['remove', '--id', 'abc'], /--id must be an organization id \(a UUID\)/],
    [['remove', '--id', "1' OR '1'='1"], /--id must be an organization id/],
    [['list', '--all'], /Unknown option '--all'/],
    [['key-create', '--name', 'ci'], /--org is required/],
    [['key-create', '--org', 'abc', '--name', 'ci'], /--org must be a UUID/],
    [['key-create', '--org', '00000000-0000-4000-8000-000000000000'], /--name is required/],
    [['key-list', '--org', 'x'], /--org must be a UUID/],
    [['key-revoke'], /--id is required/],
    [['key-revoke', '--id', "1' OR '1'='1"], /--id must be a UUID/],
    [['frob'], /unknown command "frob"/],
    [[], /no command/],
  ])('org %j: one line, exit 2, no database touched', async (args, pattern) => {
    const cwd = tempDir();
    // The bare command through tsx, as `npm run` starts it.
    const run = await cli('org', args, { cwd, tsx: args.length === 0 });
    expect(run.code).toBe(2);
    expectOneLine(run, pattern);
    expect(run.stderr).toMatch(/usage: /);
    expect(run.stdout).toBe('');
    expect(readdirSync(cwd)).toEqual([]);
  });

  it('db:migrate refuses the embedded database unless --local says so, and unknown options', async () => {
    const cwd = tempDir();
    const refused = await cli('migrate', [], { cwd, tsx: true });
    expect(refused.code).toBe(2);
    expectOneLine(
      refused,
      /DATABASE_URL is not set, so this would migrate the embedded database in \.data\/pglite/,
    );
    expect(existsSync(join(cwd, '.data'))).toBe(false);
    const unknown = await cli('migrate', ['--force'], { cwd });
    expect(unknown.code).toBe(2);
    expectOneLine(unknown, /Unknown option '--force'/);
  });

  it('deploy:workers migrates through db:migrate, so it stops there too', async () => {
    const pkg = JSON.parse(readFileSync(resolve(repoRoot, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    expect(pkg.scripts['deploy:workers']).toMatch(/^npm run db:migrate && /);
    expect(pkg.scripts['db:migrate']).toBe('tsx --no-wasm-tier-up --no-wasm-dynamic-tiering cli/migrate.ts');
    expect(pkg.scripts['org:list']).toBe('tsx --no-wasm-tier-up --no-wasm-dynamic-tiering cli/org.ts list');
    expect(pkg.scripts['tokens:reseal']).toBe(
      'tsx --no-wasm-tier-up --no-wasm-dynamic-tiering cli/tokens.ts reseal',
    );
  });

  it.each([
    [['reseal', '--batch-size', '0'], /--batch-size must be an integer from 1 to 1000/],
    [['reseal', '--all'], /Unknown option '--all'/],
    [['frob'], /unknown command "frob"/],
  ])('tokens %j: one line, exit 2, no database touched', async (args, pattern) => {
    const cwd = tempDir();
    const run = await cli('tokens', args, { cwd, tsx: args[0] === 'frob' });
    expect(run.code).toBe(2);
    expectOneLine(run, pattern);
    expect(readdirSync(cwd)).toEqual([]);
  });
});

describe('on Postgres', () => {
  let cluster: Cluster;
  let url: string;
  beforeAll(async () => {
    cluster = sharedCluster();
    url = await freshDatabase(cluster);
  });
  afterAll(async () => {
    await cluster?.remove();
  });

  it('creates, refuses a duplicate name, lists and removes', async () => {
    const env = { DATABASE_URL: url };
    const created = await cli('org', ['create', '--name', 'Acme Ltd'], { env, tsx: true });
    expect(created.code, created.stderr).toBe(0);
    const acme = JSON.parse(created.stdout) as { id: string; name: string; apiKey: string };
    expect(acme.name).toBe('Acme Ltd');

    const duplicate = await cli('org', ['create', '--name', '  acme ltd '], { env });
    expect(duplicate.code).toBe(1);
    expectOneLine(duplicate, new RegExp(`already exists \\(id ${acme.id}\\); pass --allow-duplicate`));
    expect(duplicate.stdout).toBe('');

    const second = await cli('org', ['create', '--name', 'Acme Ltd', '--allow-duplicate'], { env });
    expect(second.code).toBe(0);

    const list = await cli('org', ['list'], { env });
    expect(list.code).toBe(0);
    const orgs = JSON.parse(list.stdout) as Record<string, unknown>[];
    expect(orgs.map((o) => o.name)).toEqual(['Acme Ltd', 'Acme Ltd']);
    expect(orgs[0]?.id).toBe(acme.id);
    // Keys are shown once, at create; the list shows neither keys nor their hashes.
    expect(list.stdout).not.toContain(acme.apiKey);
    expect(Object.keys(orgs[0] ?? {}).sort()).toEqual(['createdAt', 'id', 'name']);

    const missing = await cli('org', ['remove', '--id', '00000000-0000-4000-8000-000000000000'], { env });
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.stdout)).toMatchObject({ removed: false });
    const removed = await cli('org', ['remove', '--id', acme.id], { env });
    expect(removed.code).toBe(0);
    expect(JSON.parse(removed.stdout)).toEqual({ id: acme.id, removed: true });
  });

  it('tokens:reseal re-seals every grant under the current key, reports in one line, and runs again', async () => {
    const db = await freshDatabase(cluster);
    expect((await cli('migrate', [], { env: { DATABASE_URL: db } })).code).toBe(0);
    const created = await cli('org', ['create', '--name', 'Sealed Ltd'], { env: { DATABASE_URL: db } });
    const org = JSON.parse(created.stdout) as { id: string };
    const OLD = generateKeyBase64();
    const NEW = generateKeyBase64();
    const old = await createSecretBox(OLD);
    const grantId = '00000000-0000-4000-8000-0000000000a1';
    const client = new pg.Client(db);
    await client.connect();
    try {
      await client.query(
        'INSERT INTO xero_grants (id, organization_id, access_token_enc, refresh_token_enc) VALUES ($1, $2, $3, $4)',
        [
          grantId,
          org.id,
          await old.seal('access-secret', `xero-grant:${grantId}:access`),
          await old.seal('refresh-secret', `xero-grant:${grantId}:refresh`),
        ],
      );
      const badKeys = await cli('tokens', ['reseal'], {
        env: { DATABASE_URL: db, TOKEN_ENCRYPTION_KEY: NEW, TOKEN_ENCRYPTION_KEYS_PREVIOUS: `${OLD},nope` },
      });
      expect(badKeys.code).toBe(1);
      expectOneLine(badKeys, /^tokens: invalid configuration: TOKEN_ENCRYPTION_KEYS_PREVIOUS must be/);
      expect(badKeys.stderr).not.toContain(OLD);

      // Without the old key the row is reported, left alone, and the exit says the old key must stay.
      const without = await cli('tokens', ['reseal'], {
        env: { DATABASE_URL: db, TOKEN_ENCRYPTION_KEY: NEW },
      });
      expect(without.code).toBe(1);
      expect(JSON.parse(without.stdout)).toMatchObject({ resealed: 0, unreadable: 1 });

      const env = { DATABASE_URL: db, TOKEN_ENCRYPTION_KEY: NEW, TOKEN_ENCRYPTION_KEYS_PREVIOUS: OLD };
      const run = await cli('tokens', ['reseal', '--batch-size', '1'], { env });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout.trimEnd().split('\n')).toHaveLength(1);
      const fresh = await createSecretBox(NEW);
      expect(JSON.parse(run.stdout)).toEqual({
        keyId: fresh.keyId,
        resealed: 1,
        current: 0,
        unreadable: 0,
        busy: 0,
        unreadableGrants: [],
      });
      expect(run.stdout + run.stderr).not.toMatch(/secret/);
      const [row] = (await client.query('SELECT access_token_enc, refresh_token_enc FROM xero_grants')).rows;
      expect(await fresh.open(row.refresh_token_enc, `xero-grant:${grantId}:refresh`)).toBe('refresh-secret');
      expect(await fresh.open(row.access_token_enc, `xero-grant:${grantId}:access`)).toBe('access-secret');
      const again = await cli('tokens', ['reseal'], { env });
      expect(JSON.parse(again.stdout)).toMatchObject({ resealed: 0, current: 1 });
    } finally {
      await client.end();
    }
  });

  it('db:migrate migrates the named database and refuses --local with it', async () => {
    const fresh = await freshDatabase(cluster);
    const run = await cli('migrate', [], { env: { DATABASE_URL: fresh }, tsx: true });
    expect(run.code, run.stderr).toBe(0);
    // Log lines first (the migration steps), the result last.
    const result = JSON.parse(run.stdout.trimEnd().split('\n').at(-1) ?? '') as { applied: string[] };
    const { migrations } = await import('../src/app/migrations.gen.js');
    const { platformMigrations } = await import('@honest-health/platform/internal/db/migrations.gen');
    expect(result.applied).toEqual([
      ...platformMigrations.map((m) => `platform:${m.tag}`),
      ...migrations.map((m) => m.tag),
    ]);
    const local = await cli('migrate', ['--local'], { env: { DATABASE_URL: fresh } });
    expect(local.code).toBe(2);
    expectOneLine(local, /--local is for the embedded database/);
  });

  it('db:migrate refuses a contract while a release that needs what it removes is seen, and applies it with --allow-contract', async () => {
    const url = await freshDatabase(cluster);
    // The database as the release before 0005_xero_grants left it, that release recorded as running.
    const driver = openDriver(
      loadConfig({ DATABASE_URL: url }),
      createLogger('error', {}, () => {}),
    );
    await driver.ready();
    const pool = driver.createPool('app');
    try {
      const before = migrations.findIndex((m) => m.tag === '0005_xero_grants');
      const previous = migrations[before - 1] as Migration;
      await migrate(
        pool,
        migrations.slice(0, before),
        createLogger('error', {}, () => {}),
      );
      await recordRelease(
        pool.db,
        releaseOf(
          { latestMigrationAt: previous.createdAt, needs: ['xero_connections.access_token_enc'] },
          'node',
          'previous-v1',
        ),
      );
    } finally {
      await pool.end();
      await driver.close();
    }
    const refused = await cli('migrate', [], { env: { DATABASE_URL: url } });
    expect(refused.code).toBe(1);
    expectOneLine(
      refused,
      /^db:migrate: failed: refusing contract migration 0005_xero_grants: release previous-v1 \(node, seen \d+ s ago\) needs xero_connections\.access_token_enc; .*--allow-contract/,
    );
    const allowed = await cli('migrate', ['--allow-contract'], { env: { DATABASE_URL: url } });
    expect(allowed.code, allowed.stderr).toBe(0);
    const result = JSON.parse(allowed.stdout.trimEnd().split('\n').at(-1) ?? '') as { applied: string[] };
    expect(result.applied).toContain('0005_xero_grants');
  });

  it('a database that cannot be reached is one line and exit 1', async () => {
    const run = await cli('org', ['list'], { env: { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' } });
    expect(run.code).toBe(1);
    expectOneLine(run, /^org: failed: .*ECONNREFUSED/);
  });
});

describe('on the embedded database', () => {
  it('keeps every other process off the data directory a running server holds', async () => {
    const cwd = tempDir();
    // An initdb'd data directory, so the server's boot is the app's and not PGlite's initdb
    // (first-run.test.ts boots on nothing at all).
    await seedPgliteDir(join(cwd, '.data/pglite'));
    const server = await spawnServer({ cwd, env: { API_KEY_REFRESH_MS: '200' } });
    let organizations: { apiKey: string }[] = [];
    try {
      await server.waitForReady(180_000);
      const pid = server.child.pid;
      const lockLine = new RegExp(
        `^org: the embedded database \\.data/pglite is in use by process ${pid} \\(.*\\): stop it first`,
      );

      const create = await cli('org', ['create', '--name', 'Lost Ltd'], { cwd });
      expect(create.code).toBe(1);
      expectOneLine(create, lockLine);
      expect(create.stdout).toBe(''); // no key that the server would never see
      const keyCreate = await cli(
        'org',
        ['key-create', '--org', '00000000-0000-4000-8000-000000000000', '--name', 'lost'],
        { cwd },
      );
      expect(keyCreate.code).toBe(1);
      expectOneLine(keyCreate, lockLine);
      expect(keyCreate.stdout).toBe('');
      const keyRevoke = await cli('org', ['key-revoke', '--id', '00000000-0000-4000-8000-000000000000'], {
        cwd,
      });
      expect(keyRevoke.code).toBe(1);
      expectOneLine(keyRevoke, lockLine);

      const migrate = await cli('migrate', ['--local'], { cwd });
      expect(migrate.code).toBe(1);
      expectOneLine(migrate, new RegExp(`in use by process ${pid}`));

      const reseal = await cli('tokens', ['reseal'], {
        cwd,
        env: { TOKEN_ENCRYPTION_KEY: generateKeyBase64() },
      });
      expect(reseal.code).toBe(1);
      expectOneLine(reseal, new RegExp(`^tokens: the embedded database .* in use by process ${pid}`));

      // A second server on the same directory fails its boot before it binds.
      const twin = await spawnServer({ cwd, env: {} });
      expect(await twin.exited).toBe(1);
      expect(twin.logs.some((l) => l.msg === 'listening')).toBe(false);
      expect(JSON.stringify(twin.logs)).toContain(`in use by process ${pid}`);

      expect((await server.get('/readyz')).status).toBe(200);
    } finally {
      expect(await server.stop()).toBe(0);
    }
    expect(existsSync(join(cwd, '.data/pglite', LOCK_FILE))).toBe(false);

    // A lock left by a process that died (kill -9) is taken over.
    const dead = await new Promise<number>((done) => {
      const child = execFile('true', () => done(child.pid ?? 0));
    });
    writeFileSync(
      join(cwd, '.data/pglite', LOCK_FILE),
      `${JSON.stringify({ pid: dead, command: 'npm start' })}\n`,
    );
    const create = await cli('org', ['create', '--name', 'Kept Ltd'], { cwd });
    expect(create.code, create.stderr).toBe(0);
    organizations = [JSON.parse(create.stdout)];
    expect(existsSync(join(cwd, '.data/pglite', LOCK_FILE))).toBe(false);

    // What the command wrote is what the next server serves.
    const again = await spawnServer({ cwd, env: { API_KEY_REFRESH_MS: '200' } });
    try {
      await again.waitForReady(180_000);
      await waitForKey(again, organizations[0]?.apiKey ?? '');
    } finally {
      expect(await again.stop()).toBe(0);
    }
  }, 400_000);
});
