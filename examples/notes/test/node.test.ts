import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, freshDatabase, startCluster } from './postgres.js';
import { type ServerProcess, spawnServer, until } from './server.js';
import { beats, exampleRoot, type Note, postNote, query, tsx } from './support.js';

// The example's Node entry as a child process: from its TypeScript as `npm run dev` runs it, on the
// embedded PGlite it defaults to; and bundled as `npm start` runs it (dist/node.js, scripts/build.mjs),
// on a real Postgres at DATABASE_URL.

const started: ServerProcess[] = [];
const dirs: string[] = [];

function start(cwd: string, env: Record<string, string> = {}, built = false): Promise<ServerProcess> {
  return spawnServer({
    ...(built
      ? { command: process.execPath, args: ['--enable-source-maps', join(exampleRoot, 'dist/node.js')] }
      : tsx(join(exampleRoot, 'src/node.ts'))),
    cwd,
    // The tick runs when a note is posted; its interval only matters for tick health here.
    env: { COUNT_WORDS_INTERVAL_MS: '60000', FLY_MACHINE_ID: 'notes-test', ...env },
  }).then((server) => {
    started.push(server);
    return server;
  });
}

async function wordsOf(server: ServerProcess, id: string): Promise<number | null> {
  const res = await server.get(`/notes/${id}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as Note).words;
}

afterAll(async () => {
  try {
    await Promise.allSettled(started.map((s) => s.stop()));
  } finally {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
});

describe('the notes example migrations', () => {
  it('src/migrations.gen.ts is the bundle of drizzle/', () => {
    const { command, args } = tsx(join(exampleRoot, 'scripts/bundle-migrations.ts'), '--check');
    const out = execFileSync(command, args, { encoding: 'utf8' });
    expect(out).toContain('up to date (1 migrations)');
  });
});

describe('the notes example on Node, PGlite by default', () => {
  it('boots, proves a write at /readyz, stores a note and counts its words in the tick', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'notes-pglite-'));
    dirs.push(cwd);
    const server = await start(cwd);
    await server.waitForReady();
    expect(server.logs.find((l) => l.msg === 'migrations applied')?.applied).toEqual([
      'platform:0000_platform_tables',
      'platform:0001_platform_releases',
      '0000_init',
    ]);

    expect((await server.get('/livez')).status).toBe(200);
    const ready = await server.get('/readyz');
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ok' });

    const res = await postNote(server.url, { body: '  the platform runs   this  ' });
    expect(res.status).toBe(201);
    const note = (await res.json()) as Note;
    expect(note).toMatchObject({ body: 'the platform runs   this', words: null });
    // Posting schedules the tick at once, not at its next interval a minute away.
    expect(
      await until(
        () => wordsOf(server, note.id),
        (w) => w !== null,
        20_000,
      ),
    ).toBe(4);
    const list = (await (await server.get('/notes')).json()) as { notes: Note[] };
    expect(list.notes.map((n) => n.id)).toEqual([note.id]);

    expect((await postNote(server.url, { body: '   ' })).status).toBe(400);
    expect((await server.get('/notes/not-a-uuid')).status).toBe(404);
    expect((await server.get(`/notes/${crypto.randomUUID()}`)).status).toBe(404);

    // The platform's own endpoints under the app's identity: its metric names and its tick's health.
    const metrics = await (await server.get('/metrics')).text();
    expect(metrics).toMatch(/^notes_http_requests_total\{/m);
    const ticks = (await (await server.get('/healthz/ticks')).json()) as {
      ticks: Record<string, { status: string }>;
    };
    expect(ticks.ticks['count-words']?.status).toBe('ok');

    expect(await server.stop()).toBe(0);
    // The default data directory under the working directory, locked under the app's name while it ran.
    const dataDir = join(cwd, '.data/pglite');
    expect(existsSync(dataDir)).toBe(true);
    expect(existsSync(join(dataDir, 'notes.lock'))).toBe(false);
    const db = new PGlite(dataDir);
    try {
      const beats = await db.query<{ beats: number }>(
        `SELECT beats::int AS beats FROM health_heartbeat WHERE instance_id = 'notes-test'`,
      );
      // Boot's readiness check and the /readyz above each wrote a heartbeat.
      expect(beats.rows[0]?.beats).toBeGreaterThanOrEqual(1);
      const stored = await db.query<{ words: number }>('SELECT words FROM notes WHERE id = $1', [note.id]);
      expect(stored.rows).toEqual([{ words: 4 }]);
    } finally {
      await db.close();
    }
  });
});

describe('the notes example on Node, bundled, Postgres at DATABASE_URL', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    execFileSync(process.execPath, [join(exampleRoot, 'scripts/build.mjs')], { stdio: 'pipe' });
    cluster = await startCluster();
  });
  afterAll(async () => {
    await cluster?.remove();
  });

  it('each /readyz is a write of its own, the tick counts what a route wrote, a failover disposes the pools', async () => {
    const url = await freshDatabase(cluster, 'notes');
    const cwd = mkdtempSync(join(tmpdir(), 'notes-pg-'));
    dirs.push(cwd);
    const server = await start(cwd, { DATABASE_URL: url }, true);
    await server.waitForReady();

    const before = await beats(url, 'notes-test');
    expect((await server.get('/readyz')).status).toBe(200);
    expect(await beats(url, 'notes-test')).toBe(before + 1);
    // The pools connect under the app's identity.
    const names = await query<{ application_name: string }>(
      url,
      `SELECT DISTINCT application_name FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'notes:%' ORDER BY 1`,
    );
    expect(names.map((n) => n.application_name)).toContain('notes:probe');

    const note = (await (await postNote(server.url, { body: 'one two' })).json()) as Note;
    await until(
      () => query<{ words: number | null }>(url, 'SELECT words FROM notes WHERE id = $1', [note.id]),
      (rows) => rows[0]?.words === 2,
      20_000,
    );
    // Nothing else was left for the tick, and it ran under tick health.
    const health = await query<{ consecutive_failures: number; last_success_at: Date | null }>(
      url,
      `SELECT consecutive_failures, last_success_at FROM tick_health WHERE tick = 'count-words'`,
    );
    expect(health).toHaveLength(1);
    expect(health[0]?.consecutive_failures).toBe(0);
    expect(health[0]?.last_success_at).not.toBeNull();

    // A failover, as the pools meet it: their connections cut, the database answering read-only.
    const name = new URL(url).pathname.slice(1);
    await cluster.query(`ALTER DATABASE ${name} SET default_transaction_read_only = on`);
    await cluster.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE 'notes:%'`,
      [name],
    );
    try {
      const readOnly = await until(
        async () => {
          const res = await server.get('/readyz');
          return { status: res.status, body: (await res.json()) as { checks: Record<string, string> } };
        },
        (r) => r.status === 503 && r.body.checks.database === 'read_only',
        15_000,
      );
      expect(readOnly.body.checks).toMatchObject({ database: 'read_only' });
      expect(server.logs.some((l) => l.msg === 'database pool disposed')).toBe(true);
    } finally {
      await cluster.query(`ALTER DATABASE ${name} RESET default_transaction_read_only`);
    }
    await until(
      async () => (await server.get('/readyz')).status,
      (status) => status === 200,
      15_000,
    );
    expect(await server.stop()).toBe(0);
  });
});
