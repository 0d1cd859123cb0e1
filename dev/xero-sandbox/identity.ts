// The identity server: the authorize endpoint (which auto-approves, standing in for the user at the
// consent screen, unless the sandbox shows its consent page), the token endpoint (authorization_code and refresh_token grants) and revocation.
import { type Context, Hono } from 'hono';
import { CONSENT_FIELDS, consentPage, NEW_TENANT } from './consent.js';
import { json, oauthError } from './errors.js';
import { randomToken } from './ids.js';
import { type GrantResult, parseScope } from './oauth.js';
import type { SandboxState } from './state.js';

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value.replace(/\+/g, ' '));
  } catch {
    return value;
  }
}

/** HTTP Basic first (what Xero documents), else client_id/client_secret in the form body. */
function clientCredentials(
  authorization: string | undefined,
  form: URLSearchParams,
): { id: string; secret: string } | null {
  const basic = /^Basic\s+(\S+)\s*$/i.exec(authorization ?? '');
  if (basic) {
    let decoded: string;
    try {
      decoded = atob(basic[1] as string);
    } catch {
      return null;
    }
    const colon = decoded.indexOf(':');
    if (colon < 0) return null;
    return { id: safeDecode(decoded.slice(0, colon)), secret: safeDecode(decoded.slice(colon + 1)) };
  }
  const id = form.get('client_id');
  const secret = form.get('client_secret');
  return id && secret ? { id, secret } : null;
}

function isAbsoluteHttpUrl(value: string | undefined): value is string {
  if (!value) return false;
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hash === '';
  } catch {
    return false;
  }
}

async function readForm(c: Context): Promise<URLSearchParams | null> {
  const type = (c.req.header('content-type') ?? '').toLowerCase();
  if (!type.startsWith('application/x-www-form-urlencoded')) return null;
  return new URLSearchParams(await c.req.text());
}

const noStore = { 'cache-control': 'no-store', pragma: 'no-cache' };

export function identityRoutes(state: SandboxState): Hono {
  const app = new Hono();

  type Consent = { deny: true } | { deny: false; tenantIds: string[] };

  // The authorize request, from the query (GET) or from the consent page's form (POST). Without a
  // consent yet, the consent page answers when the sandbox shows one and no plan is queued; else the
  // queued plan (or the default tenants) stands in for the user's choice.
  const authorize = (c: Context, q: Record<string, string>, consent: Consent | null) => {
    if (q.client_id !== state.client.clientId) {
      return json(400, {
        error: 'unauthorized_client',
        error_description: 'Unknown client or client not enabled',
      });
    }
    const redirectUri = q.redirect_uri;
    const allowed = state.client.redirectUris;
    if (!isAbsoluteHttpUrl(redirectUri) || (allowed !== null && !allowed.includes(redirectUri))) {
      return json(400, { error: 'invalid_request', error_description: 'Invalid redirect_uri' });
    }
    const back = (params: Record<string, string | undefined>) => {
      const url = new URL(redirectUri);
      for (const [key, value] of Object.entries(params))
        if (value !== undefined) url.searchParams.set(key, value);
      return c.redirect(url.toString(), 302);
    };
    if (q.response_type !== 'code') return back({ error: 'unsupported_response_type', state: q.state });
    const requested = parseScope(q.scope ?? '');
    if (requested.length === 0) return back({ error: 'invalid_scope', state: q.state });
    const method = q.code_challenge ? (q.code_challenge_method ?? 'plain') : null;
    if (method !== null && method !== 'S256' && method !== 'plain') {
      return back({ error: 'invalid_request', error_description: 'code_challenge_method', state: q.state });
    }
    if (consent === null && state.options.consentPage && state.authorizePlans.length === 0) {
      return c.html(
        consentPage({
          action: new URL(c.req.url).pathname,
          params: q,
          providerName: state.providerName,
          tenants: [...state.tenants.values()],
          suggestedName: `Sandbox organisation ${state.tenants.size + 1}`,
        }),
        200,
        noStore,
      );
    }
    const plan = consent ??
      state.authorizePlans.shift() ?? { deny: false, tenantIds: null, grantScope: null };
    if (plan.deny) return back({ error: 'access_denied', state: q.state });
    const tenantIds = (plan.tenantIds ?? state.defaultTenantIds()).filter((id) => state.tenants.has(id));
    const grantScope = 'grantScope' in plan ? plan.grantScope : null;
    const scope = grantScope ? parseScope(grantScope) : requested;
    const code = state.identity.issueCode(
      {
        clientId: state.client.clientId,
        redirectUri,
        scope,
        tenantIds,
        nonce: q.nonce ?? null,
        codeChallenge: q.code_challenge ?? null,
        codeChallengeMethod: method,
      },
      state.now(),
    );
    state.stats.authorizations += 1;
    return back({ code, scope: scope.join(' '), state: q.state, session_state: randomToken(16) });
  };

  app.get('/connect/authorize', (c) => authorize(c, c.req.query(), null));

  // The consent page's answer: the request's parameters again, with the decision and the organisation.
  app.post('/connect/authorize', async (c) => {
    if (!state.options.consentPage) return c.notFound();
    const form = await readForm(c);
    if (!form) return json(400, { error: 'invalid_request', error_description: 'form body expected' });
    const q: Record<string, string> = {};
    for (const [key, value] of form)
      if (!Object.values(CONSENT_FIELDS).includes(key as never)) q[key] = value;
    if (form.get(CONSENT_FIELDS.decision) !== 'allow') return authorize(c, q, { deny: true });
    const chosen = form.get(CONSENT_FIELDS.tenant) ?? NEW_TENANT;
    if (chosen !== NEW_TENANT && !state.tenants.has(chosen)) {
      return json(400, { error: 'invalid_request', error_description: 'unknown organisation' });
    }
    const tenantId =
      chosen === NEW_TENANT
        ? state.createTenant({
            name:
              form.get(CONSENT_FIELDS.tenantName)?.trim() || `Sandbox organisation ${state.tenants.size + 1}`,
            connectOnAuthorize: false,
          }).id
        : chosen;
    return authorize(c, q, { deny: false, tenantIds: [tenantId] });
  });

  // The token and revocation endpoints' client authentication: a form body, and this client's id and
  // secret (a 401 invalid_client otherwise, with Xero's description where it gives one).
  const authenticatedClient = async (c: Context, wrong?: string, missing?: string) => {
    const form = await readForm(c);
    if (!form) return oauthError(400, 'invalid_request', 'body must be application/x-www-form-urlencoded');
    const credentials = clientCredentials(c.req.header('authorization'), form);
    if (credentials?.id === state.client.clientId && credentials.secret === state.client.clientSecret) {
      return { form, credentials };
    }
    state.stats.invalidClients += 1;
    return oauthError(401, 'invalid_client', credentials ? wrong : missing);
  };

  app.post('/connect/token', async (c) => {
    const client = await authenticatedClient(c, 'wrong client id or secret', 'no client credentials');
    if (client instanceof Response) return client;
    const { form, credentials } = client;
    const now = state.now();
    const grantType = form.get('grant_type');
    let result: GrantResult;
    if (grantType === 'authorization_code') {
      const code = form.get('code');
      const redirectUri = form.get('redirect_uri');
      if (!code || !redirectUri)
        return oauthError(400, 'invalid_request', 'code and redirect_uri are required');
      result = await state.identity.redeemCode(
        { code, clientId: credentials.id, redirectUri, codeVerifier: form.get('code_verifier') },
        now,
      );
    } else if (grantType === 'refresh_token') {
      const token = form.get('refresh_token');
      if (!token) return oauthError(400, 'invalid_request', 'refresh_token is required');
      result = state.identity.refresh(token, credentials.id, now);
    } else {
      return oauthError(400, 'unsupported_grant_type', `grant_type ${grantType ?? '(none)'}`);
    }
    if (!result.ok) {
      state.stats.invalidGrants += 1;
      return oauthError(400, 'invalid_grant', result.reason);
    }
    if (grantType === 'authorization_code') state.stats.authCodeGrants += 1;
    else {
      state.stats.refreshGrants += 1;
      if (result.reused) state.stats.refreshReusedInGrace += 1;
    }
    return json(200, state.identity.tokenResponse(result.grant, result.pair, now), noStore);
  });

  // RFC 7009, as Xero implements it for refresh tokens: revokes the grant and removes every connection
  // of that user to the app, not only this grant's (xero-node README, revokeToken).
  app.post('/connect/revocation', async (c) => {
    const client = await authenticatedClient(c);
    if (client instanceof Response) return client;
    const { form, credentials } = client;
    const token = form.get('token');
    if (!token) return oauthError(400, 'invalid_request', 'token is required');
    if (state.identity.revokeRefreshToken(token, credentials.id, state.now())) state.stats.revocations += 1;
    return c.body(null, 200, noStore);
  });

  return app;
}
