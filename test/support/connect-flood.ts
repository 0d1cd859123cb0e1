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

/**
 * Committed + rolled-back transactions of one database. A pool's connected backend flushes its
 * counters at most once a second while busy and 10 s after it went idle (PGSTAT_IDLE_INTERVAL,
 * PostgreSQL 15+): read only that long after the last transaction.
 */
async function xactCount(databaseUrl: string): Promise<number> {
  await sleep(11_000);
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>(
      'SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()',
    );
    return Number(rows[0]?.n ?? 0);
  } finally {
    await client.end();
  }
}

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
  // The reader's own connection and query are transactions too: measured alike in both windows.
  const startedIdle = await xactCount(databaseUrl);
  const idleStarted = performance.now();
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
  // Each reading is a transaction of its own; the idle window (one flush wait long) is scaled to the
  // flood's (which includes one flush wait too).
  const idleScaled = ((idleXacts - 1) * (durationMs + 11_000)) / Math.max(idleMs, 1);
  const xacts = after - before - 1;
  return {
    requests,
    statuses,
    xacts,
    idleXacts: Math.round(idleScaled * 100) / 100,
    xactsPerRequest: Math.max(0, xacts - idleScaled) / requests,
    durationMs: Math.round(durationMs),
  };
}
