// A push tick whose claim dies with 57P01 mid-invocation, for the Worker suites (Neon's driver and
// Hyperdrive): only a dispose-and-retry inside the same invocation can still push.
import pg from 'pg';
import type { Cluster } from './postgres.js';
import { until } from './until.js';

/**
 * Holds `invoice_pushes` so that the claim of `run` (a `scheduled()` invocation) waits, terminates the
 * backend it waits on (57P01, a poison error), lets go, and waits for `run` to end.
 */
export async function terminateWaitingClaim(
  cluster: Cluster,
  url: string,
  run: () => Promise<unknown>,
): Promise<void> {
  const locker = new pg.Client(url);
  await locker.connect();
  try {
    await locker.query('BEGIN');
    // EXCLUSIVE: writes wait, reads do not (the refresh tick, which runs first, reads due pushes).
    await locker.query('LOCK TABLE invoice_pushes IN EXCLUSIVE MODE');
    const running = run();
    // Awaited below; until then a failure must not count as unhandled.
    running.catch(() => {});
    const dbName = new URL(url).pathname.slice(1);
    const waiting = await until(
      async () =>
        (
          await cluster.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock' AND query ILIKE '%update invoice_pushes%'`,
            [dbName],
          )
        ).rows,
      (rows) => rows.length > 0,
      20_000,
      25,
    );
    await cluster.query('SELECT pg_terminate_backend($1)', [waiting[0]?.pid]);
    await locker.query('COMMIT');
    await running;
  } finally {
    await locker.end();
  }
}

/** The push's status, read on a connection of its own. */
export async function pushStatus(url: string, id: string): Promise<string | undefined> {
  const db = new pg.Client(url);
  await db.connect();
  try {
    const { rows } = await db.query<{ status: string }>('SELECT status FROM invoice_pushes WHERE id = $1', [
      id,
    ]);
    return rows[0]?.status;
  } finally {
    await db.end();
  }
}
