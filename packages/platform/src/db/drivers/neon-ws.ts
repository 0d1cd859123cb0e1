import { Client, Pool } from '@neondatabase/serverless';
import { drizzle } from 'drizzle-orm/neon-serverless';
import type { Logger } from '../../util/log.js';
import type { DatabasePool, PoolRole, SqlSession } from '../types.js';
import { type PgCompatiblePool, type SessionTimeout, wrapPgCompatiblePool } from './pg-compatible.js';

export interface NeonWsPoolOptions {
  url: string;
  max: number;
  maxLifetimeSeconds: number;
  connectionTimeoutMs: number;
  log: Logger;
  /** STATEMENT_TIMEOUT_MS, where sessions last (not behind Neon's pooled endpoint). */
  timeout?: SessionTimeout;
}

/** A WebSocket pool: sessions, interactive transactions and advisory locks, like node-postgres. */
export function createNeonWsPool(options: NeonWsPoolOptions, role: PoolRole): DatabasePool {
  const pool = new Pool({
    connectionString: options.url,
    max: options.max,
    maxLifetimeSeconds: options.maxLifetimeSeconds,
    connectionTimeoutMillis: options.connectionTimeoutMs,
    idleTimeoutMillis: 30_000,
  });
  return wrapPgCompatiblePool(
    pool as unknown as PgCompatiblePool,
    drizzle({ client: pool }),
    role,
    options.log,
    options.timeout,
  );
}

/** One WebSocket session for the length of `fn`: what migrations need where the app runs over HTTP. */
export async function withNeonSession<T>(url: string, fn: (session: SqlSession) => Promise<T>): Promise<T> {
  const client = new Client(url);
  await client.connect();
  try {
    return await fn(client as unknown as SqlSession);
  } finally {
    await client.end().catch(() => {});
  }
}
