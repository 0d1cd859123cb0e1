// What every accounting API call goes through before its handler: a live access token, a tenant that
// token is connected to, the scope the endpoint needs, and the tenant's rate limits.

import { setTimeout as delay } from 'node:timers/promises';
import type { MiddlewareHandler } from 'hono';
import { forbidden, tooManyRequests, unauthorized } from './errors.js';
import { msDateTime, usDateTime, uuid } from './ids.js';
import type { Grant } from './oauth.js';
import type { SandboxState, Tenant } from './state.js';

export type ApiEnv = { Variables: { grant: Grant; tenant: Tenant } };

export function requireAccessToken(state: SandboxState): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const auth = state.identity.authenticate(c.req.header('authorization'), state.now());
    if (!auth.ok) {
      state.stats.unauthorized += 1;
      if (auth.reason === 'expired') {
        const at = usDateTime(auth.expiredAt);
        return unauthorized(`TokenExpired: token expired at ${at}`, `The token expired at '${at}'`);
      }
      return unauthorized(
        'AuthenticationUnsuccessful',
        auth.reason === 'missing' ? 'No access token' : 'Invalid token',
      );
    }
    c.set('grant', auth.grant);
    await next();
  };
}

export function requireTenant(state: SandboxState): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    // A missing header, an unknown tenant and a tenant the user has no connection to all get Xero's
    // 403 AuthenticationUnsuccessful. Access follows the user's connections, not the grant's: a token
    // works for every tenant its user connected to the app (why GET /connections needs authEventId).
    const tenantId = c.req.header('xero-tenant-id')?.trim() ?? '';
    const tenant = state.tenants.get(tenantId) ?? state.tenants.get(tenantId.toLowerCase());
    const grant = c.get('grant');
    if (
      !tenant ||
      !state.identity.userConnections(grant.clientId).some((conn) => conn.tenantId === tenant.id)
    ) {
      state.stats.forbidden += 1;
      return forbidden('AuthenticationUnsuccessful');
    }
    c.set('tenant', tenant);
    await next();
  };
}

/** Passes when the grant holds any of `scopes` (e.g. accounting.transactions or accounting.invoices). */
export function requireScope(state: SandboxState, scopes: string[]): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const granted = c.get('grant').scope;
    if (!scopes.some((scope) => granted.includes(scope))) {
      state.stats.forbidden += 1;
      return forbidden('AuthorizationUnsuccessful');
    }
    await next();
  };
}

// Ends early when the client goes away; timers/promises removes its abort listener when the delay
// ends, where a hand-made one piles up a listener per delayed call on a long-lived signal.
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return delay(ms, undefined, { signal }).catch(() => {});
}

export function rateLimit(state: SandboxState): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const admission = state.limiter.acquire(c.get('tenant').id, state.now());
    if (!admission.ok) {
      state.stats.rateLimited += 1;
      state.stats.rateLimitedByProblem[admission.problem] += 1;
      return tooManyRequests(admission.problem, admission.headers);
    }
    try {
      const { latencyMs } = state.limiter.limits;
      if (latencyMs > 0) await sleep(latencyMs, state.shutdownSignal);
      await next();
    } finally {
      admission.release();
    }
    for (const [name, value] of Object.entries(admission.headers)) c.res.headers.set(name, value);
  };
}

/** The accounting API's response envelope. */
export function envelope(state: SandboxState, body: Record<string, unknown>): Record<string, unknown> {
  return {
    Id: uuid(),
    Status: 'OK',
    ProviderName: state.providerName,
    DateTimeUTC: msDateTime(state.now()),
    ...body,
  };
}
