import { neon } from '@neondatabase/serverless';
import { drizzle } from 'drizzle-orm/neon-http';
import type { DatabasePool, Row, SqlSession } from '../types.js';

export interface NeonHttpPoolOptions {
  url: string;
  /** Bounds every HTTP request (the probe's): there is no pool, so the fetch itself must not hang. */
  timeoutMs?: number;
  /** HTTP has no sessions; session work (migrations, locks) goes over a WebSocket instead. */
  withSession<T>(fn: (session: SqlSession) => Promise<T>): Promise<T>;
}

/**
 * One HTTP request per query and nothing to pin: a failover cannot strand a connection here, which
 * is why the probe runs over this driver whenever the database is Neon.
 */
export function createNeonHttpPool(options: NeonHttpPoolOptions): DatabasePool {
  const sql = neon(options.url);
  const { timeoutMs } = options;
  return {
    db: drizzle({ client: sql }),
    query: async <R extends Row>(text: string, params?: unknown[]) => {
      const result = await sql.query(text, params ?? [], {
        fullResults: true,
        ...(timeoutMs ? { fetchOptions: { signal: AbortSignal.timeout(timeoutMs) } } : {}),
      });
      return { rows: result.rows as R[] };
    },
    withSession: (fn) => options.withSession(fn),
    stats: () => ({ total: 0, idle: 0, waiting: 0 }),
    end: async () => {},
  };
}
