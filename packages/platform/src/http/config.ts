import { object, optional, refine, string } from 'zod/mini';
import { ConfigError, type Env, int, parseEnv } from '../util/config.js';

// HTTP server limits for the long-lived runtimes (Node, Bun): how long a client may take to send its
// headers and its request, how long a connection may sit without a request, and how many connections
// the process keeps open at once. The reasons for each default are in docs/http-timeouts.md.

export interface HttpConfig {
  /** Node: headersTimeout. From the first byte of a request (or the connection) to its last header. */
  headersTimeoutMs: number;
  /** Node: requestTimeout. From the first byte of a request to the last byte of its body. */
  requestTimeoutMs: number;
  /** Node: keepAliveTimeout. How long a connection may wait for its next request after a response. */
  keepAliveTimeoutMs: number;
  /**
   * A connection with no request in flight and no byte either way for this long is closed (Node: the
   * socket timeout, Bun: Bun.serve's idleTimeout, whole seconds, at most 255).
   */
  idleTimeoutMs: number;
  /** Open HTTP connections at most; 'auto' derives it from the descriptor limit (connection-cap.ts). */
  maxConnections: number | 'auto';
}

/**
 * The most of a request's body the server reads and throws away after answering it early (a 413 on
 * the declared size), so that its close does not reset a client still sending: four times the
 * largest body the app takes (1 MiB). Past it the client ignores the answer, and is cut.
 */
export const DISCARD_MAX_BYTES = 4 * 1024 * 1024;

/** Bun.serve's idleTimeout is whole seconds and at most 255 (bun-types serve.d.ts). */
export const BUN_MAX_IDLE_TIMEOUT_MS = 255_000;

const httpSchema = object({
  HTTP_HEADERS_TIMEOUT_MS: int(1000, 600_000, 10_000),
  HTTP_REQUEST_TIMEOUT_MS: int(1000, 3_600_000, 30_000),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: int(100, 600_000, 5000),
  HTTP_IDLE_TIMEOUT_MS: int(1000, BUN_MAX_IDLE_TIMEOUT_MS, 30_000),
  HTTP_MAX_CONNECTIONS: optional(string()).check(
    refine(
      (v) => v === undefined || v === 'auto' || (/^\d+$/.test(v) && Number(v) >= 1 && Number(v) <= 1_000_000),
      { message: 'must be auto or an integer from 1 to 1000000' },
    ),
  ),
});

export function loadHttpConfig(env: Env): HttpConfig {
  const e = parseEnv(httpSchema, env);
  const problems: string[] = [];
  // Node refuses a headersTimeout above a non-zero requestTimeout (ERR_OUT_OF_RANGE at createServer).
  if (e.HTTP_HEADERS_TIMEOUT_MS > e.HTTP_REQUEST_TIMEOUT_MS) {
    problems.push('HTTP_HEADERS_TIMEOUT_MS must not be above HTTP_REQUEST_TIMEOUT_MS');
  }
  if (problems.length > 0) throw new ConfigError(problems);
  const max = e.HTTP_MAX_CONNECTIONS;
  return {
    headersTimeoutMs: e.HTTP_HEADERS_TIMEOUT_MS,
    requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT_MS,
    keepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT_MS,
    idleTimeoutMs: e.HTTP_IDLE_TIMEOUT_MS,
    maxConnections: max === undefined || max === 'auto' ? 'auto' : Number(max),
  };
}
