// API keys as rows (src/app/api-keys.ts, api-key-registry.ts, migration 0012): rotation across two
// replicas, the operator's org:key:* commands, and a database from before keeps its keys.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, loadConfig } from '@honest-health/platform';
import { DatabaseHandle, migrate } from '@honest-health/platform/db';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey, hashApiKey } from '../src/app/api-keys.js';
import { openDriver } from '../src/app/databases.js';
import { migrations } from '../src/app/migrations.gen.js';
import { freshDatabase, migratedDatabase } from './support/databases.js';
import { invoiceBody, waitForKey } from './support/orgs.js';
import type { Cluster } from './support/postgres.js';
import { type ServerProcess, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import { bundleTools, type ToolsBundle } from './support/tools-bundle.js';

const REFRESH_MS = 500;
const dirs: string[] = [];

// The org command, bundled once (cli.test.ts covers it through tsx, as `npm run` starts it).
let tools: ToolsBundle;
function org(args: string[], env: Record<string, string>) {
  const cwd = mkdtempSync(join(tmpdir(), 'keys-'));
  dirs.push(cwd);
  return tools.run('org', args, { cwd, env });
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

async function post(server: ServerProcess, key: string, idempotencyKey: string) {
  return fetch(`${server.url}/api/invoices`, {
    method: 'POST',
    headers: { ...bearer(key), 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
    body: JSON.stringify(invoiceBody()),
  });
}

/** Every row that holds the organization's data, as text: rotation must leave all of it as it was. */
async function dataOf(client: pg.Client, organizationId: string): Promise<string> {
  const tables = ['invoice_pushes', 'xero_connections', 'xero_grants', 'connect_links', 'oauth_states'];
  const out: unknown[] = [];
  for (const table of tables) {
    const { rows } = await client.query(`SELECT * FROM ${table} WHERE organization_id = $1 ORDER BY 1`, [
      organizationId,
    ]);
    out.push(table, rows);
  }
  const { rows } = await client.query(
    'SELECT id, name, default_connection_id, created_at FROM organizations WHERE id = $1',
    [organizationId],
  );
  out.push('organizations', rows);
  return JSON.stringify(out);
}

let cluster: Cluster;
beforeAll(async () => {
  cluster = sharedCluster();
  tools = await bundleTools();
});
afterAll(async () => {
  try {
    tools?.remove();
    await cluster?.remove();
  } finally {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
});

describe('rotation', () => {
  it('a second key, then the first revoked: 401 on both replicas within API_KEY_REFRESH_MS, no data touched', async () => {
    const url = await migratedDatabase(cluster);
    const env = { DATABASE_URL: url };
    const created = await org(['create', '--name', 'Rotating Ltd'], env);
    expect(created.code, created.stderr).toBe(0);
    const acme = JSON.parse(created.stdout) as { id: string; apiKey: string };

    const serverEnv = { DATABASE_URL: url, API_KEY_REFRESH_MS: String(REFRESH_MS) };
    const replicas = await Promise.all([spawnServer({ env: serverEnv }), spawnServer({ env: serverEnv })]);
    const client = new pg.Client(url);
    await client.connect();
    try {
      await Promise.all(replicas.map((r) => r.waitForReady(60_000)));
      for (const [i, r] of replicas.entries()) {
        expect((await post(r, acme.apiKey, `before-${i}`)).status).toBe(202);
      }

      const second = await org(['key-create', '--org', acme.id, '--name', 'rotated'], env);
      expect(second.code, second.stderr).toBe(0);
      const next = JSON.parse(second.stdout) as { id: string; apiKey: string; name: string };
      expect(next).toMatchObject({ organizationId: acme.id, name: 'rotated' });
      for (const r of replicas) await waitForKey(r, next.apiKey, 10_000);

      const listed = await org(['key-list', '--org', acme.id], env);
      const keys = JSON.parse(listed.stdout) as { id: string; name: string; revokedAt: string | null }[];
      expect(keys.map((k) => k.name)).toEqual(['default', 'rotated']);
      expect(listed.stdout).not.toContain(acme.apiKey);
      expect(listed.stdout).not.toContain(next.apiKey);
      expect(listed.stdout).not.toContain(hashApiKey(acme.apiKey));
      const first = keys[0]?.id as string;

      const before = await dataOf(client, acme.id);
      const revoked = await org(['key-revoke', '--id', first], env);
      expect(revoked.code, revoked.stderr).toBe(0);
      const revokedAt = Date.now();
      expect(JSON.parse(revoked.stdout)).toMatchObject({ id: first, revoked: true });

      // Every replica refuses the old key within the refresh interval (plus a refresh's own time).
      const cutOff = await Promise.all(
        replicas.map(async (r) => {
          for (;;) {
            const res = await r.get('/api/invoices?limit=1', { headers: bearer(acme.apiKey) });
            if (res.status === 401) return Date.now() - revokedAt;
            expect(res.status).toBe(200);
            if (Date.now() - revokedAt > REFRESH_MS + 5000) return Number.POSITIVE_INFINITY;
            await new Promise((done) => setTimeout(done, 25));
          }
        }),
      );
      for (const ms of cutOff) expect(ms).toBeLessThan(REFRESH_MS + 1500);
      for (const [i, r] of replicas.entries()) {
        expect((await post(r, next.apiKey, `after-${i}`)).status).toBe(202);
        // The invoice the old key queued is the new key's too: same organization, same data.
        const res = await r.get('/api/invoices?limit=10', { headers: bearer(next.apiKey) });
        expect(((await res.json()) as { data: unknown[] }).data.length).toBeGreaterThanOrEqual(2);
      }
      // No row of the organization's data changed through the revocation (the two POSTs after it added
      // rows of their own: compare what was there).
      const after = JSON.parse(await dataOf(client, acme.id)) as unknown[];
      const was = JSON.parse(before) as unknown[];
      const pushesBefore = was[1] as { id: string }[];
      const pushesAfter = (after[1] as { id: string }[]).filter((p) =>
        pushesBefore.some((b) => b.id === p.id),
      );
      // The pushes may have moved on by a tick (no Xero here: they wait); compare them field by field.
      expect(pushesAfter).toEqual(pushesBefore);
      expect(after.slice(2)).toEqual(was.slice(2));

      // The last active key is refused unless --allow-last; an unknown key is one line, exit 1.
      const last = await org(['key-revoke', '--id', next.id], env);
      expect(last.code).toBe(1);
      expect(last.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(last.stderr).toMatch(/is the last active key of organization .*--allow-last/);
      const again = await org(['key-revoke', '--id', first], env);
      expect(again.code, again.stderr).toBe(0);
      expect(JSON.parse(again.stdout)).toMatchObject({ revoked: false });
      const unknown = await org(['key-revoke', '--id', '00000000-0000-4000-8000-000000000000'], env);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toMatch(/^org:key:revoke: no API key has id 0{8}-/);
      const noOrg = await org(
        ['key-create', '--org', '00000000-0000-4000-8000-000000000000', '--name', 'x'],
        env,
      );
      expect(noOrg.code).toBe(1);
      expect(noOrg.stderr).toMatch(/^org:key:create: no organization has id/);
      expect(noOrg.stdout).toBe('');

      // last_used_at is written by the index's refresh, not per request.
      await new Promise((done) => setTimeout(done, REFRESH_MS * 3));
      const { rows } = await client.query(
        'SELECT name, last_used_at FROM api_keys WHERE organization_id = $1',
        [acme.id],
      );
      expect(rows.every((r) => r.last_used_at !== null)).toBe(true);
    } finally {
      await client.end();
      await Promise.all(replicas.map((r) => r.stop()));
    }
  });
});

describe('migration 0012 (api_keys)', () => {
  it('organizations from before keep their keys; one the previous release creates later works too', async () => {
    const url = await freshDatabase(cluster);
    const log = createLogger('warn');
    const driver = openDriver(loadConfig({ DATABASE_URL: url }), log);
    await driver.ready();
    const handle = new DatabaseHandle(driver, 'app', log);
    const index = migrations.findIndex((m) => m.tag === '0012_api_keys');
    expect(index).toBeGreaterThan(0);
    // Written as the previous release's org:create wrote them: the key's hash on the organization.
    const oldOrganization = async (name: string) => {
      const key = generateApiKey();
      await handle.db.execute(
        sql`INSERT INTO organizations (name, api_key_hash) VALUES (${name}, ${hashApiKey(key)})`,
      );
      return key;
    };
    let keys: string[];
    let lateKey: string;
    try {
      await migrate(handle.pool, migrations.slice(0, index), log);
      keys = [await oldOrganization('Before A'), await oldOrganization('Before B')];
      await migrate(handle.pool, migrations, log);
      // The previous release still running during the deploy creates an organization its way.
      lateKey = await oldOrganization('During the deploy');
    } finally {
      await handle.pool.end();
      await driver.close();
    }
    const server = await spawnServer({ env: { DATABASE_URL: url } });
    try {
      await server.waitForReady(60_000);
      for (const [i, key] of [...keys, lateKey].entries()) {
        expect((await post(server, key, `migrated-${i}`)).status).toBe(202);
      }
      expect((await server.get('/api/invoices', { headers: bearer(generateApiKey()) })).status).toBe(401);
    } finally {
      await server.stop();
    }
    // The previous release reads organizations.api_key_hash: still there for every organization.
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    try {
      const db = drizzle({ client: pool });
      const rows = (await db.execute(sql`SELECT api_key_hash FROM organizations ORDER BY created_at`)).rows;
      expect(rows.map((r) => r.api_key_hash)).toEqual([...keys, lateKey].map(hashApiKey));
    } finally {
      await pool.end();
    }
  });
});
