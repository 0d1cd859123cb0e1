import { causeChain, viaAnyWrapper } from '../util/error-chain.js';

// Is this error a sign that the connection (or the whole pool) is pointed at the wrong server or is
// broken? Then the caller disposes the pool and retries once on a fresh one (ARCHITECTURE.md, "Poison
// classification and the retry exactly once").
// Everything else (constraint, syntax and data errors, serialization failures, statement timeouts,
// application bugs) is about the query, so rebuilding the pool would only add load.

// 25006: read-only transaction, we are on a standby or a demoted primary.
// 57P01/57P02/57P03: admin shutdown/terminate, crash of another backend, cannot connect now.
const SQLSTATES = new Set(['25006', '57P01', '57P02', '57P03']);
// SQLSTATE class 08: connection exception (08000, 08003, 08006, 08001, 08004, 08P01, ...).
const CONNECTION_EXCEPTION = /^08[0-9A-Z]{3}$/;

// Socket errno codes (ECONNREFUSED: the old primary is gone, a fresh pool finds the new one) and
// postgres.js's own connection codes.
const TRANSPORT_CODES = new Set([
  'ECONNRESET',
  'EPIPE',
  'ECONNREFUSED',
  'ETIMEDOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
]);

// Anchored, so that the query text inside a wrapper's message ("Failed query: ...") never matches.
const MESSAGES: ReadonlyArray<readonly [RegExp, string]> = [
  // node-postgres (and the Neon WebSocket driver, its fork) when the socket ends under a client;
  // also pg-pool's "Connection terminated due to connection timeout".
  [/^Connection terminated/, 'connection terminated'],
  [/^Client has encountered a connection error and is not queryable/, 'not queryable'],
  // libpq-based drivers when a TLS session dies.
  [/^SSL connection has been closed unexpectedly|^SSL SYSCALL error/, 'ssl closed'],
  // Neon HTTP driver: fetch() itself failed (the TypeError is on `sourceError`, not `cause`).
  [/^Error connecting to database: /, 'http transport'],
  // Neon HTTP driver: the proxy lost its upstream connection mid-query and answered 400 with the
  // socket error's message but no SQLSTATE.
  [/^(?:read|write) (?:ECONNRESET|EPIPE)\b/, 'socket reset'],
  // Another caller disposed the pool while this work was using it: the work belongs on the new one.
  [/^Cannot use a pool after calling end on the pool/, 'pool ended'],
];
// Neon HTTP driver: any status but 400 (a Postgres error) is "Server error (HTTP status N)". Only the
// proxy/gateway failures count: 413 (request too large) and 507 (response too large) are the query's.
const NEON_HTTP_STATUS = /^Server error \(HTTP status (50[0234])\)/;

function reasonOf(e: object): string | undefined {
  const { code, message, type, target } = e as Record<string, unknown>;
  if (typeof code === 'string') {
    if (SQLSTATES.has(code) || CONNECTION_EXCEPTION.test(code) || TRANSPORT_CODES.has(code)) return code;
  }
  if (typeof message === 'string') {
    for (const [pattern, reason] of MESSAGES) if (pattern.test(message)) return reason;
    const status = NEON_HTTP_STATUS.exec(message)?.[1];
    if (status !== undefined) return `http ${status}`;
  }
  // The Neon WebSocket driver passes the socket's 'error' event through as the error itself: an
  // Event, not an Error (in Node, ws's ErrorEvent with the real Error on `.error`).
  if (!(e instanceof Error) && type === 'error' && typeof target === 'object' && target !== null) {
    return 'websocket error';
  }
  return undefined;
}

/** A short, secret-free label for why `err` poisons its pool (for logs and metrics); else undefined. */
export function poisonReason(err: unknown): string | undefined {
  // Breadth first, through every kind of wrapper: the outermost meaningful label wins.
  for (const e of causeChain(err, { links: viaAnyWrapper })) {
    if (typeof e !== 'object' || e === null) continue;
    const reason = reasonOf(e);
    if (reason !== undefined) return reason;
  }
  return undefined;
}

/**
 * True when `err` means the connection or pool is broken or read-only: dispose it and retry once.
 * Walks the whole cause chain (Drizzle wraps driver errors).
 *
 * @example
 * ```ts
 * isPoisoned(Object.assign(new Error('cannot execute INSERT in a read-only transaction'), { code: '25006' })); // true
 * isPoisoned(Object.assign(new Error('duplicate key'), { code: '23505' })); // false: the query, not the pool
 * ```
 */
export function isPoisoned(err: unknown): boolean {
  return poisonReason(err) !== undefined;
}

/**
 * The pool had no free connection in time. Not a broken pool (disposing it would only add load),
 * but the request still cannot be served now: callers answer 503 with Retry-After, not 500.
 */
export function isPoolExhausted(err: unknown): boolean {
  for (const e of causeChain(err)) {
    if (e instanceof Error && /^timeout exceeded when trying to connect/.test(e.message)) return true;
  }
  return false;
}
