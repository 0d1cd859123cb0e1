import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Miniflare } from 'miniflare';
import { parse } from 'smol-toml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, freshDatabase, startCluster } from './postgres.js';
import { beats, exampleRoot, type Note, query, tsx } from './support.js';

// The example's Worker (src/worker.ts) as wrangler bundles it from the example's own wrangler.toml, in
// workerd through Miniflare's `hyperdrives` option: the HYPERDRIVE binding leads, through Miniflare's
// local proxy, to a real Postgres (without Hyperdrive's pooling and cache, as under `wrangler dev`).
// The schema is migrated the way a deploy does it, by the example's `npm run db:migrate`.

const wrangler = parse(readFileSync(join(exampleRoot, 'wrangler.toml'), 'utf8')) as {
  compatibility_date: string;
  compatibility_flags: string[];
  vars: Record<string, string>;
};

let cluster: Cluster;
let outdir: string;
const started: Miniflare[] = [];

beforeAll(async () => {
  outdir = mkdtempSync(join(tmpdir(), 'notes-worker-'));
  execFileSync('npx', ['wrangler', 'deploy', '--dry-run', '--outdir', outdir], {
    cwd: exampleRoot,
    env: { ...process.env, XDG_CONFIG_HOME: join(outdir, 'config'), WRANGLER_SEND_METRICS: 'false' },
    stdio: 'pipe',
  });
  cluster = await startCluster();
}, 180_000);
afterAll(async () => {
  try {
    await Promise.allSettled(started.map((mf) => mf.dispose()));
    await cluster?.remove();
  } finally {
    if (outdir) rmSync(outdir, { recursive: true, force: true });
  }
});

// Miniflare requires a password in a Hyperdrive origin; the test cluster trusts local connections.
const withPassword = (url: string) => Object.assign(new URL(url), { password: 'notes-local' }).toString();

function worker(url: string): Miniflare {
  const mf = new Miniflare({
    modules: true,
    scriptPath: join(outdir, 'worker.js'),
    modulesRoot: outdir,
    compatibilityDate: wrangler.compatibility_date,
    compatibilityFlags: wrangler.compatibility_flags,
    hyperdrives: { HYPERDRIVE: withPassword(url) },
    bindings: { ...wrangler.vars, METRICS_PUBLIC: 'true' },
  });
  started.push(mf);
  return mf;
}

function migrate(url: string): string {
  const { command, args } = tsx('scripts/migrate.ts');
  return execFileSync(command, args, {
    cwd: exampleRoot,
    env: { PATH: process.env.PATH, DATABASE_URL: url, LOG_LEVEL: 'warn' },
    encoding: 'utf8',
  });
}

async function readyz(mf: Miniflare) {
  const res = await mf.dispatchFetch('http://notes/readyz');
  return {
    status: res.status,
    body: (await res.json()) as { status: string; checks: Record<string, string> },
  };
}

describe('the notes example as a Worker through Hyperdrive, in workerd', () => {
  it('refuses readiness on a database its migrations were not applied to', async () => {
    const mf = worker(await freshDatabase(cluster, 'notes'));
    expect((await mf.dispatchFetch('http://notes/livez')).status).toBe(200);
    expect(await readyz(mf)).toEqual({
      status: 503,
      body: { status: 'unavailable', checks: { boot: 'failed', database: 'schema_behind' } },
    });
  });

  it('a read-only database is not ready, and is again once it takes writes, without a restart', async () => {
    const url = await freshDatabase(cluster, 'notes');
    migrate(url);
    const mf = worker(url);
    expect((await readyz(mf)).status).toBe(200);
    const name = new URL(url).pathname.slice(1);
    // What a former primary answers after a failover; a `SELECT 1` would still succeed.
    await cluster.query(`ALTER DATABASE ${name} SET default_transaction_read_only = on`);
    try {
      expect(await readyz(mf)).toEqual({
        status: 503,
        body: { status: 'unavailable', checks: { boot: 'ok', database: 'read_only' } },
      });
      expect(await query(url, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);
    } finally {
      await cluster.query(`ALTER DATABASE ${name} RESET default_transaction_read_only`);
    }
    expect((await readyz(mf)).status).toBe(200);
  });

  it('/readyz proves a write through the binding, a route writes a note, scheduled() runs the tick', async () => {
    const url = await freshDatabase(cluster, 'notes');
    expect(JSON.parse(migrate(url))).toEqual({
      applied: ['platform:0000_platform_tables', 'platform:0001_platform_releases', '0000_init'],
      latest: '0000_init',
    });
    expect(JSON.parse(migrate(url))).toEqual({ applied: [], latest: '0000_init' });
    const mf = worker(url);

    expect(await readyz(mf)).toEqual({
      status: 200,
      body: { status: 'ok', checks: { boot: 'ok', database: 'ok' } },
    });
    const before = await beats(url, 'worker');
    expect(before).toBeGreaterThanOrEqual(1);
    expect((await readyz(mf)).status).toBe(200);
    expect(await beats(url, 'worker')).toBe(before + 1);

    const res = await mf.dispatchFetch('http://notes/notes', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ body: 'counted on a cron' }),
    });
    expect(res.status).toBe(201);
    const note = (await res.json()) as Note;
    expect(await query(url, 'SELECT body FROM notes WHERE id = $1', [note.id])).toEqual([
      { body: 'counted on a cron' },
    ]);

    // A note the Worker never saw (no request scheduled the tick for it): only the cron counts it.
    const [quiet] = await query<{ id: string }>(
      url,
      `INSERT INTO notes (body) VALUES ('left for the cron') RETURNING id`,
    );
    const fetcher = (await mf.getWorker()) as unknown as { scheduled(o: { cron: string }): Promise<unknown> };
    await fetcher.scheduled({ cron: '* * * * *' });
    for (const [id, words] of [
      [note.id, 4],
      [quiet?.id, 4],
    ] as const) {
      const got = await mf.dispatchFetch(`http://notes/notes/${id}`);
      expect(((await got.json()) as Note).words).toBe(words);
    }
    const health = await query<{ instance_id: string; consecutive_failures: number }>(
      url,
      `SELECT instance_id, consecutive_failures FROM tick_health WHERE tick = 'count-words'`,
    );
    expect(health).toEqual([{ instance_id: 'worker', consecutive_failures: 0 }]);

    const metrics = await (await mf.dispatchFetch('http://notes/metrics')).text();
    expect(metrics).toMatch(/^notes_tick_/m);
  });
});
