import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, describe, expect, it } from 'vitest';
import { spawnServer } from './support/server.js';

// `npm start` builds and runs `node dist/node.js`; with no DATABASE_URL it keeps its data in
// .data/pglite under the working directory, so each test gets a directory of its own.
const cwd = mkdtempSync(join(tmpdir(), 'pglite-start-'));
afterAll(() => rmSync(cwd, { recursive: true, force: true }));

describe('embedded default (PGlite)', () => {
  it('serves /readyz 200 with no DATABASE_URL, and a second start reopens the same data', async () => {
    const first = await spawnServer({ cwd, env: { DATABASE_URL: undefined } });
    await first.waitForReady(90_000);
    const res = await first.get('/readyz');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok', checks: { boot: 'ok', database: 'ok' } });
    expect(first.logs.some((l) => l.msg === 'migrations applied')).toBe(true);
    expect(await first.stop()).toBe(0);

    const second = await spawnServer({ cwd, env: { DATABASE_URL: undefined } });
    await second.waitForReady(60_000);
    expect((await second.get('/readyz')).status).toBe(200);
    // Same data: nothing left to migrate.
    expect(second.logs.some((l) => l.msg === 'migrations applied')).toBe(false);
    expect(await second.stop()).toBe(0);

    const db = new PGlite(join(cwd, '.data/pglite'));
    try {
      const { rows } = await db.query<{ beats: number }>(
        'SELECT sum(beats)::int AS beats FROM health_heartbeat',
      );
      expect(rows[0]?.beats).toBeGreaterThanOrEqual(2);
    } finally {
      await db.close();
    }
  });
});
