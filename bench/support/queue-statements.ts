// What a drain's statements do per job, counted rather than timed (BENCH_STATEMENTS=1 in bench:queue):
// pg_stat_statements' buffer hits and WAL per statement, which a machine's neighbours do not move.
import type { Cluster } from '../../test/support/postgres.js';

/** The cluster settings pg_stat_statements needs (loaded at start). */
export const STATEMENT_SETTINGS = {
  shared_preload_libraries: 'pg_stat_statements',
  'pg_stat_statements.track': 'all',
} as const;

export interface StatementPerJob {
  query: string;
  calls: number;
  buffers: number;
  wal_records: number;
  wal_bytes: number;
  exec_us: number;
}

export async function installStatements(cluster: Cluster): Promise<void> {
  await cluster.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
}

export async function resetStatements(cluster: Cluster): Promise<void> {
  await cluster.query('SELECT pg_stat_statements_reset()');
}

/** The `limit` statements of `database` that executed longest since the reset, each per job of `jobs`. */
export async function statementsPerJob(
  cluster: Cluster,
  database: string,
  jobs: number,
  limit = 4,
): Promise<StatementPerJob[]> {
  const { rows } = await cluster.query<{
    query: string;
    calls: string;
    buffers: string;
    wal_records: string;
    wal_bytes: string;
    exec_ms: number;
  }>(
    `SELECT left(regexp_replace(s.query, '\\s+', ' ', 'g'), 60) AS query, s.calls::text,
            (s.shared_blks_hit + s.shared_blks_read)::text AS buffers, s.wal_records::text,
            s.wal_bytes::text, s.total_exec_time AS exec_ms
     FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
     WHERE d.datname = $1 ORDER BY s.total_exec_time DESC LIMIT $2`,
    [database, limit],
  );
  const per = (n: number) => Math.round((n / jobs) * 100) / 100;
  return rows.map((r) => ({
    query: r.query,
    calls: Number(r.calls),
    buffers: per(Number(r.buffers)),
    wal_records: per(Number(r.wal_records)),
    wal_bytes: Math.round(Number(r.wal_bytes) / jobs),
    exec_us: Math.round((r.exec_ms * 1000) / jobs),
  }));
}
