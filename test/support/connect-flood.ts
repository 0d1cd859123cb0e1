// What a flood of unauthenticated connect requests costs the database: pg_stat_database's committed and
// rolled-back transactions over the flood, against the same database's rate while nothing is sent.
import pg from 'pg';

export interface FloodResult {
  requests: number;
  statuses: Record<string, number>;
  /** Transactions of the server's database during the flood. */
  xacts: number;
  /** Transactions in an idle window as long as the flood. */
  idleXacts: number;
  /** (xacts - idle) / requests. */
  xactsPerRequest: number;
  durationMs: number;
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** What one reading adds to the count it reads next: its session's start and its transaction. */
const READER_XACTS = 2;

/**
 * Committed + rolled-back transactions of one database. A backend flushes its counters at most once a
 * second while busy and up to 10 s after it went idle (PGSTAT_IDLE_INTERVAL, PostgreSQL 15+), but at
 * once when it exits: every other session of the database is ended first (the server's pool opens new
 * ones when it needs them), in one transaction whose own cost is READER_XACTS in the next reading.
 */
async function xactCount(databaseUrl: string): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('BEGIN');
    const others = 'datname = current_database() AND pid <> pg_backend_pid()';
    await client.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE ${others}`);
    for (let left = 1; left > 0; ) {
      // Inside a transaction the activity and the counters are snapshots: clear them to see anew.
      await client.query('SELECT pg_stat_clear_snapshot()');
      const { rows } = await client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE ${others}`,
      );
      left = rows[0]?.n ?? 0;
      if (left > 0) await sleep(20);
    }
    await client.query('SELECT pg_stat_clear_snapshot()');
    const { rows } = await client.query<{ n: string }>(
      'SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()',
    );
    await client.query('COMMIT');
    return Number(rows[0]?.n ?? 0);
  } finally {
    await client.end();
  }
}

/** How long the database's idle rate is measured before the flood. */
const IDLE_WINDOW_MS = 3_000;

const randomToken = () => Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64url');

/**
 * `requests` requests, `concurrency` at a time, alternating the three unauthenticated connect
 * endpoints with unknown (well-formed) links and states: the confirm page, the POST that would spend a
 * link, and Xero's callback.
 */
export async function floodConnect(options: {
  baseUrl: string;
  databaseUrl: string;
  requests: number;
  concurrency: number;
  headers?: (i: number) => Record<string, string>;
}): Promise<FloodResult> {
  const { baseUrl, databaseUrl, requests, concurrency } = options;
  const startedIdle = await xactCount(databaseUrl);
  const idleStarted = performance.now();
  await sleep(IDLE_WINDOW_MS);
  let next = 0;
  const statuses: Record<string, number> = {};
  const send = async (i: number) => {
    const kind = i % 3;
    const headers = { accept: 'application/json', ...(options.headers?.(i) ?? {}) };
    const res =
      kind === 0
        ? await fetch(`${baseUrl}/connect/xero/start?link=${randomToken()}`, { headers })
        : kind === 1
          ? await fetch(`${baseUrl}/connect/xero/start?link=${randomToken()}`, { method: 'POST', headers })
          : await fetch(`${baseUrl}/connect/xero/callback?code=c&state=${randomToken()}`, {
              headers: { ...headers, cookie: `xero_connect=${randomToken()}` },
            });
    await res.arrayBuffer();
    statuses[res.status] = (statuses[res.status] ?? 0) + 1;
  };
  const before = await xactCount(databaseUrl);
  const idleXacts = before - startedIdle;
  const idleMs = performance.now() - idleStarted;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < requests) await send(next++);
    }),
  );
  const durationMs = performance.now() - started;
  const after = await xactCount(databaseUrl);
  // The idle window's rate, scaled to the flood's duration.
  const idleScaled = (Math.max(0, idleXacts - READER_XACTS) * durationMs) / Math.max(idleMs, 1);
  const xacts = after - before - READER_XACTS;
  return {
    requests,
    statuses,
    xacts,
    idleXacts: Math.round(idleScaled * 100) / 100,
    xactsPerRequest: Math.max(0, xacts - idleScaled) / requests,
    durationMs: Math.round(durationMs),
  };
}
