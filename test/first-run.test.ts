// A newcomer's first command (README, "Two commands"; dev/start.ts): `npm start` in a fresh directory
// with nothing configured runs the Xero sandbox beside the server, prints a development
// organization's key once, and an invoice submitted with it ends `pushed`. With DATABASE_URL or a
// XERO_* credential set, no sandbox starts; the product alone (`node dist/node.js`) never has one.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase } from './support/databases.js';
import { invoiceBody } from './support/orgs.js';
import { seedPgliteDir } from './support/pglite-template.js';
import type { Cluster } from './support/postgres.js';
import { type LogLine, type ServerProcess, spawnServer, spawnStart } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';

const dirs: string[] = [];
const freshDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'first-run-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

// An initdb'd embedded database, for the tests about what runs beside it rather than about a first
// boot on nothing (the first test's): PGlite's initdb is most of a boot's time.
const seededDir = async () => {
  const dir = freshDir();
  await seedPgliteDir(join(dir, '.data/pglite'));
  return dir;
};

const developmentLine = (l: LogLine) => l.msg.startsWith('development mode:');

async function submitAndWait(server: ServerProcess, key: string, idempotencyKey: string) {
  const headers = { authorization: `Bearer ${key}` };
  const created = await fetch(`${server.url}/api/invoices`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
    body: JSON.stringify(invoiceBody()),
  });
  expect(created.status).toBe(202);
  const { id } = (await created.json()) as { id: string };
  const deadline = Date.now() + 20_000;
  for (;;) {
    const res = await server.get(`/api/invoices/${id}`, { headers });
    const push = (await res.json()) as { status: string; xeroInvoiceId: string | null };
    if (push.status === 'pushed') return push;
    if (Date.now() > deadline) throw new Error(`not pushed in time: ${JSON.stringify(push)}`);
    await new Promise((done) => setTimeout(done, 100));
  }
}

describe('npm start with nothing configured', () => {
  it('runs the Xero sandbox in process: an invoice sent with the printed key ends pushed, after a restart too', async () => {
    const cwd = freshDir();
    // Only what `npm start` in a shell would have: no DATABASE_URL, no TOKEN_ENCRYPTION_KEY, no XERO_*.
    const env = { TOKEN_ENCRYPTION_KEY: undefined };
    const server = await spawnStart({ cwd, env, scanned: false });
    let key: string;
    try {
      await server.waitForReady(180_000);
      const lines = server.logs.filter(developmentLine);
      expect(lines).toHaveLength(1);
      // The one warning of the boot: the development token key is named in it, not in a line of its own.
      expect(server.logs.filter((l) => l.level === 'warn')).toEqual(lines);
      const line = lines[0] as LogLine;
      expect(line.level).toBe('warn');
      expect(line.msg).toMatch(/bundled Xero sandbox runs in this process/);
      key = /shown this once: (hh_live_[A-Za-z0-9_-]+)/.exec(line.msg)?.[1] ?? '';
      expect(key).not.toBe('');
      expect(server.logs.some((l) => /Xero is not configured/.test(l.msg))).toBe(false);
      expect((await submitAndWait(server, key, 'first-run-1')).xeroInvoiceId).toMatch(/^[0-9a-f-]{36}$/);
    } finally {
      expect(await server.stop()).toBe(0);
    }

    // The same directory again: a fresh in-memory sandbox, the same organization and key, no key shown.
    const again = await spawnStart({ cwd, env, scanned: false });
    try {
      await again.waitForReady(180_000);
      const line = again.logs.find(developmentLine);
      expect(line?.msg).toMatch(/its API key was shown when it was created/);
      expect(JSON.stringify(again.logs)).not.toContain('hh_live_');
      await submitAndWait(again, key, 'first-run-2');
    } finally {
      await again.stop();
    }
  }, 400_000);

  it('a XERO_* credential set: no sandbox, whatever the database', async () => {
    const server = await spawnStart({
      cwd: await seededDir(),
      env: {
        TOKEN_ENCRYPTION_KEY: undefined,
        XERO_CLIENT_ID: 'real-client',
        XERO_CLIENT_SECRET: 'real-secret',
      },
    });
    try {
      await server.waitForReady(180_000);
      expect(server.logs.some(developmentLine)).toBe(false);
      expect(JSON.stringify(server.logs)).not.toContain('hh_live_');
    } finally {
      await server.stop();
    }
  }, 200_000);
});

describe('the product alone', () => {
  it('`node dist/node.js` with nothing configured runs no sandbox: Xero stays unconfigured', async () => {
    const server = await spawnServer({ cwd: await seededDir(), env: { TOKEN_ENCRYPTION_KEY: undefined } });
    try {
      await server.waitForReady(180_000);
      expect(server.logs.some(developmentLine)).toBe(false);
      expect(server.logs.some((l) => /Xero is not configured/.test(l.msg))).toBe(true);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  }, 200_000);
});

describe('with DATABASE_URL set', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = sharedCluster();
  });
  afterAll(async () => {
    await cluster?.remove();
  });

  it('no sandbox starts and no organization is made: Xero stays unconfigured', async () => {
    const url = await freshDatabase(cluster);
    const server = await spawnStart({ cwd: freshDir(), env: { DATABASE_URL: url } });
    try {
      await server.waitForReady(60_000);
      expect(server.logs.some(developmentLine)).toBe(false);
      expect(server.logs.some((l) => /Xero is not configured/.test(l.msg))).toBe(true);
      const client = new pg.Client(url);
      await client.connect();
      try {
        expect((await client.query('SELECT count(*)::int AS n FROM organizations')).rows[0].n).toBe(0);
      } finally {
        await client.end();
      }
    } finally {
      await server.stop();
    }
  });
});
