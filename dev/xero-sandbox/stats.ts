// Counters the control API reports, so tests can assert what a client did, not just what it saw.
import type { FaultKind } from './faults.js';
import type { RateLimitProblem } from './rate-limit.js';
import type { RouteTarget } from './urls.js';

export interface SandboxStats {
  /** Invoices actually stored, per tenant id (idempotent replays do not add to it). */
  invoicesCreated: Record<string, number>;
  /** Every HTTP request to /api.xro/2.0/Invoices*, whatever became of it (faults, 401s, 429s included). */
  invoiceCalls: number;
  /** Every non-control HTTP request by target. */
  calls: Record<RouteTarget, number>;
  /** Redirects issued by /identity/connect/authorize with a code (denials not included). */
  authorizations: number;
  /** Successful authorization_code exchanges. */
  authCodeGrants: number;
  /** Successful refresh_token grants, grace-window reuses included. */
  refreshGrants: number;
  /** Refresh grants that presented an already-rotated token inside its grace window. */
  refreshReusedInGrace: number;
  /** Token requests answered 400 invalid_grant. */
  invalidGrants: number;
  /** Token (and revocation) requests answered 401 invalid_client. */
  invalidClients: number;
  /** Refresh tokens revoked (revocation endpoint or control API). */
  revocations: number;
  /** DELETE /connections/{id} calls that removed a connection. */
  disconnections: number;
  /** API requests answered 401 (unknown, expired or missing access token). */
  unauthorized: number;
  /** API requests answered 403 (tenant not connected to the token, or scope missing). */
  forbidden: number;
  /** Requests answered 429 by the rate limiter (injected 429 faults are counted in faultsFired). */
  rateLimited: number;
  rateLimitedByProblem: Record<RateLimitProblem, number>;
  /** Invoice requests answered 400 with a ValidationException. */
  validationErrors: number;
  /** Requests answered from the idempotency store instead of being executed again. */
  idempotentReplays: number;
  /** Same Idempotency-Key with a different request (400) or while the first is still running (409). */
  idempotencyConflicts: number;
  /** Injected faults that fired, by kind. */
  faultsFired: Record<FaultKind, number>;
}

export function emptyStats(): SandboxStats {
  return {
    invoicesCreated: {},
    invoiceCalls: 0,
    calls: { authorize: 0, token: 0, revocation: 0, connections: 0, invoices: 0, api: 0, other: 0 },
    authorizations: 0,
    authCodeGrants: 0,
    refreshGrants: 0,
    refreshReusedInGrace: 0,
    invalidGrants: 0,
    invalidClients: 0,
    revocations: 0,
    disconnections: 0,
    unauthorized: 0,
    forbidden: 0,
    rateLimited: 0,
    rateLimitedByProblem: { minute: 0, concurrent: 0, day: 0, appminute: 0 },
    validationErrors: 0,
    idempotentReplays: 0,
    idempotencyConflicts: 0,
    faultsFired: { '500': 0, '503': 0, '429': 0, hang: 0, drop: 0 },
  };
}
