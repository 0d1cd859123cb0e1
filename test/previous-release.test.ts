// A rollout runs the previous release on the schema the new one migrated: the release this work starts
// from (PREVIOUS_RELEASE), built from git history in a scratch worktree, boots on a database this
// release migrated, takes invoices, pushes them to the Xero sandbox, and logs no error.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createLogger } from '@honest-health/platform';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { freshDatabase } from './support/databases.js';
import { invoiceBody, waitForKey } from './support/orgs.js';
import type { Cluster } from './support/postgres.js';
import { repoRoot, type ServerProcess, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import { connectedOrganization, openDatabase, type Sandbox, sandboxEnv, testBox } from './support/ticks.js';
import { until } from './support/until.js';

/** The main before two releases could share a schema; its migrator ran all migrations in one transaction. */
const PREVIOUS_RELEASE = 'f1bfa43';
const INVOICES = 10;
const run = promisify(execFile);

let cluster: Cluster;
let sandbox: Sandbox;
let scratch: string;
let checkout: string;

/**
 * node_modules for the scratch checkout, without copying: a link to each of this checkout's packages,
 * except the workspaces, which link to the scratch checkout's own (its platform is the previous one).
 * The previous release's dependencies are a subset of this one's.
 */
function linkNodeModules(into: string): void {
  const modules = join(repoRoot, 'node_modules');
  mkdirSync(join(into, 'node_modules/@honest-health'), { recursive: true });
  for (const entry of readdirSync(modules)) {
    if (entry === '@honest-health') continue;
    symlinkSync(join(modules, entry), join(into, 'node_modules', entry));
  }
  symlinkSync('../../packages/platform', join(into, 'node_modules/@honest-health/platform'));
}

beforeAll(async () => {
  // A clean clone has the history; a shallow one does not, and says so here.
  await run('git', ['cat-file', '-e', `${PREVIOUS_RELEASE}^{commit}`], { cwd: repoRoot }).catch(() => {
    throw new Error(`commit ${PREVIOUS_RELEASE} is not in this clone: git fetch --unshallow`);
  });
  scratch = mkdtempSync(join(tmpdir(), 'previous-release-'));
  checkout = join(scratch, 'repo');
  await run('git', ['worktree', 'add', '--detach', checkout, PREVIOUS_RELEASE], { cwd: repoRoot });
  linkNodeModules(checkout);
  await run(process.execPath, ['tools/build.mjs'], { cwd: checkout });
  [cluster, sandbox] = await Promise.all([sharedCluster(), startXeroSandbox({ port: 0 })]);
});

afterAll(async () => {
  try {
    await sandbox?.close();
    await cluster?.remove();
    if (checkout)
      await run('git', ['worktree', 'remove', '--force', checkout], { cwd: repoRoot }).catch(() => {});
  } finally {
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  }
});

describe(`the previous release (${PREVIOUS_RELEASE}) on the schema this release migrated`, () => {
  it('boots, connects, takes invoices and pushes them, with no error line', async () => {
    const url = await freshDatabase(cluster, 'previous');
    // This release's migrations, through its migrator: what its boot or `db:migrate` does.
    const handle = await openDatabase(
      url,
      createLogger('error', {}, () => {}),
    );
    const { org, tenantId } = await connectedOrganization(handle.db, await testBox(), sandbox, 'Rollback Co');
    await handle.close();

    let server: ServerProcess | undefined;
    const direct = new pg.Client(url);
    await direct.connect();
    try {
      server = await spawnServer({
        cwd: checkout,
        command: process.execPath,
        args: ['--enable-source-maps', join(checkout, 'dist/node.js')],
        env: {
          DATABASE_URL: url,
          TICK_INTERVAL_MS: '300',
          REGISTRY_REFRESH_MS: '100',
          ...sandboxEnv(sandbox),
        },
      });
      const s = server;
      await until(
        // Not listening yet while it boots: 0.
        async () => (await s.get('/readyz').catch(() => undefined))?.status ?? 0,
        (status) => status === 200,
        30_000,
      ).catch((err: unknown) => {
        throw new Error(`${(err as Error).message}\n${s.logs.map((l) => JSON.stringify(l)).join('\n')}`);
      });
      await waitForKey(s, org.apiKey);
      for (let i = 0; i < INVOICES; i++) {
        const res = await s.get('/api/invoices', {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            authorization: `Bearer ${org.apiKey}`,
            'idempotency-key': `previous-${i}`,
          },
          body: JSON.stringify(invoiceBody()),
        });
        expect(res.status).toBe(202);
      }
      const pushed = await until(
        async () =>
          (
            await direct.query<{ n: number }>(
              "SELECT count(*)::int AS n FROM invoice_pushes WHERE status = 'pushed'",
            )
          ).rows[0]?.n,
        (n) => n === INVOICES,
        30_000,
      );
      expect(pushed).toBe(INVOICES);
      expect(sandbox.state.statsSnapshot().invoicesCreated[tenantId]).toBe(INVOICES);
      await s.stop();
      expect(s.logs.filter((l) => l.level === 'error' || l.level === 'fatal')).toEqual([]);
      expect(s.output.filter((l) => /error/i.test(l))).toEqual([]);
    } finally {
      await server?.stop();
      await direct.end();
    }
  });
});
