// A wave of concurrent large invoices against one server, its resident memory sampled throughout:
// what a MiB of request body in flight costs the process, and what each answer said.
import { readFileSync } from 'node:fs';
import pg from 'pg';

/** An invoice of about `bytes` bytes of JSON that passes validation (long line descriptions). */
export function largeInvoice(bytes: number): Record<string, unknown> {
  const perItem = 4000;
  const items = Math.max(1, Math.min(500, Math.round(bytes / (perItem + 60))));
  return {
    contact: { name: 'Large Ltd' },
    date: '2026-12-01',
    currency: 'NZD',
    lineItems: Array.from({ length: items }, (_, i) => ({
      description: `${i} ${'x'.repeat(perItem - 10)}`,
      quantity: '1',
      unitAmount: '1.00',
    })),
  };
}

/** VmRSS of a process in MiB; undefined without /proc. */
export function rssMib(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

export interface WaveResult {
  statuses: Record<string, number>;
  /** Answers that were 429 or 503 without a Retry-After. */
  refusedWithoutRetryAfter: number;
  /** The largest 2xx answer body, bytes. */
  largest2xxBytes: number;
  rssBeforeMib: number | undefined;
  rssPeakMib: number | undefined;
  ms: number;
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** `count` POSTs of `body` at once, each with its own Idempotency-Key, RSS sampled every 5 ms. */
export async function rssWave(options: {
  url: string;
  headers: Record<string, string>;
  body: string;
  count: number;
  pid: number | undefined;
  keyPrefix: string;
}): Promise<WaveResult> {
  const rssBeforeMib = rssMib(options.pid);
  let peak = rssBeforeMib;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const now = rssMib(options.pid);
      if (now !== undefined && (peak === undefined || now > peak)) peak = now;
      await sleep(5);
    }
  })();
  const statuses: Record<string, number> = {};
  let refusedWithoutRetryAfter = 0;
  let largest2xxBytes = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: options.count }, async (_, i) => {
      try {
        const res = await fetch(options.url, {
          method: 'POST',
          headers: { ...options.headers, 'idempotency-key': `${options.keyPrefix}-${i}` },
          body: options.body,
        });
        const text = await res.text();
        statuses[res.status] = (statuses[res.status] ?? 0) + 1;
        if (res.status >= 200 && res.status < 300) largest2xxBytes = Math.max(largest2xxBytes, text.length);
        if ((res.status === 429 || res.status === 503) && !res.headers.get('retry-after'))
          refusedWithoutRetryAfter += 1;
      } catch {
        statuses.error = (statuses.error ?? 0) + 1;
      }
    }),
  );
  const ms = performance.now() - started;
  // Memory freed after the answers is not the peak: keep sampling a moment for what lags behind.
  await sleep(100);
  sampling = false;
  await sampler;
  return { statuses, refusedWithoutRetryAfter, largest2xxBytes, rssBeforeMib, rssPeakMib: peak, ms };
}

/**
 * A backend that stays connected flushes its statistics at most once a second while busy, and after
 * 10 s once idle (PGSTAT_IDLE_INTERVAL, PostgreSQL 15+): a reading is only whole that long after the
 * last transaction of the server's pool.
 */
export const STATS_FLUSH_MS = 11_000;

/** Committed + rolled-back transactions of the database at `url` (its counters flushed first). */
export async function databaseXacts(url: string, settleMs = STATS_FLUSH_MS): Promise<number> {
  await sleep(settleMs);
  const client = new pg.Client({ connectionString: url });
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
