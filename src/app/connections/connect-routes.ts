import { Hono } from 'hono';
import type { Logger } from '../../platform/log.js';
import type { SecretBox } from '../../platform/secret-box.js';
import type { ApiKeyIndex } from '../api-key-index.js';
import { type AuthEnv, requireApiKey } from '../auth.js';
import type { XeroConfig } from '../config.js';
import { ApiError } from '../errors.js';
import { authEventIdOf, type XeroClient } from '../xero/client.js';
import { saveGrant } from './grants.js';
import { consumeState, issueState } from './oauth-state.js';
import { missingInvoiceScope } from './scopes.js';

export interface ConnectRoutesDeps {
  apiKeys: ApiKeyIndex;
  xero: XeroClient;
  config: XeroConfig;
  box: SecretBox;
  log: Logger;
  /** Scheduled once a connection is stored: invoices that waited for one can be pushed now. */
  pushTick: string;
}

/**
 * The OAuth connect flow. GET /connect/xero (with the organization's API key) redirects to Xero with
 * a single-use state; Xero sends the browser back to /connect/xero/callback with a code, which is
 * exchanged for tokens that are stored encrypted, one connection per tenant the user approved.
 */
export function connectRoutes(deps: ConnectRoutesDeps) {
  const { config, xero, box, log } = deps;
  const routes = new Hono<AuthEnv>();

  routes.get('/xero', requireApiKey(deps.apiKeys), async (c) => {
    if (!config.clientId)
      throw new ApiError(503, 'xero_not_configured', 'Xero is not configured on this server');
    const organization = c.get('organization');
    const state = await c.var.idempotent((db) => issueState(db, organization.id));
    const url = new URL(config.authorizeUrl);
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id: config.clientId,
      redirect_uri: config.redirectUri,
      scope: config.scopes,
      state,
    }).toString();
    return c.redirect(url.toString(), 302);
  });

  routes.get('/xero/callback', async (c) => {
    const { code, state, error } = c.req.query();
    if (error) throw new ApiError(400, 'xero_denied', 'the connection was not approved in Xero');
    if (!code || !state) {
      throw new ApiError(400, 'invalid_callback', 'code and state are required', [
        ...(code ? [] : [{ path: 'code', message: 'required' }]),
        ...(state ? [] : [{ path: 'state', message: 'required' }]),
      ]);
    }
    const organizationId = await c.var.idempotent((db) => consumeState(db, state));
    if (!organizationId)
      throw new ApiError(400, 'invalid_state', 'the state is unknown, used or expired; start again');
    const exchanged = await xero.exchangeCode(code, config.redirectUri);
    if (exchanged.kind === 'no_refresh_token') {
      throw new ApiError(
        400,
        'xero_scope_missing',
        'Xero granted no refresh token: the scopes must include offline_access (XERO_SCOPES)',
        [{ path: 'scope', message: 'must include offline_access' }],
      );
    }
    if (exchanged.kind === 'invalid_client') {
      log.error('xero rejected the client credentials (invalid_client): check XERO_CLIENT_ID/SECRET');
      throw new ApiError(502, 'xero_exchange_failed', 'Xero did not accept this server’s client credentials');
    }
    if (exchanged.kind !== 'ok') {
      throw new ApiError(
        502,
        'xero_exchange_failed',
        'Xero did not accept the authorization code; start again',
      );
    }
    const { tokens } = exchanged;
    const missing = missingInvoiceScope(tokens.scope);
    if (missing) {
      throw new ApiError(400, 'xero_scope_missing', missing, [{ path: 'scope', message: missing }]);
    }
    // Only the tenants of this consent: GET /connections lists every tenant the Xero *user* ever
    // connected to the app, which may belong to another organization of ours (xero-identity.yaml:
    // authEventId, "Identifier shared across connections authorised at the same time").
    const authEventId = authEventIdOf(tokens.accessToken);
    if (!authEventId) {
      throw new ApiError(
        502,
        'xero_exchange_failed',
        'Xero’s access token names no authentication event, so the approved tenants cannot be told apart',
      );
    }
    const tenants = await xero.connections(tokens.accessToken, authEventId).catch((err: unknown) => {
      log.warn('xero /connections failed during the callback', { err });
      throw new ApiError(
        502,
        'xero_connections_failed',
        'Xero did not list the approved tenants; start again',
      );
    });
    const saved = await c.var.idempotent((db) =>
      saveGrant(db, box, { organizationId, authEventId, scope: tokens.scope ?? null, tokens, tenants }),
    );
    for (const r of saved.refused) {
      log.warn('xero tenant held by another organization: not connected', {
        organization: organizationId,
        tenant: r.tenantId,
      });
    }
    log.info('xero connected', {
      organization: organizationId,
      tenants: saved.connected.length,
      refused: saved.refused.length,
    });
    if (saved.connected.length > 0) c.var.schedule(deps.pushTick);
    return c.json({ connected: saved.connected, refused: saved.refused });
  });

  return routes;
}
