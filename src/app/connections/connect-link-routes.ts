import { Hono } from '@honest-health/platform';
import type { AuthEnv } from '../auth.js';
import type { XeroConfig } from '../config.js';
import { ApiError } from '../errors.js';
import { DEFAULT_MAX_PENDING_FLOWS, LINK_TTL_MS, mintLink } from './connect-links.js';

/**
 * POST /api/connect-links (behind the API key): a one-time link a browser opens to connect Xero.
 * The link is a bearer credential until a browser opens it; from then on the flow is bound to that
 * browser (connect-routes.ts).
 */
export function connectLinkRoutes(deps: { config: XeroConfig; maxPendingFlows?: number }) {
  const { config, maxPendingFlows = DEFAULT_MAX_PENDING_FLOWS } = deps;
  const routes = new Hono<AuthEnv>();

  routes.post('/', async (c) => {
    if (!config.clientId)
      throw new ApiError(503, 'xero_not_configured', 'Xero is not configured on this server');
    const organization = c.get('organization');
    const minted = await c.var.withDatabase((db) => mintLink(db, organization.id, maxPendingFlows));
    if (minted.kind === 'too_many') {
      // The code predates the quota's wider count (links and opened flows); kept for clients.
      throw new ApiError(
        429,
        'too_many_connect_links',
        `quota ORG_MAX_PENDING_CONNECT_FLOWS: at most ${maxPendingFlows} pending connect flows (unopened links and flows waiting for Xero) at a time; links expire ${LINK_TTL_MS / 60_000} minutes after minting`,
        [{ path: 'quota', message: `pending connect flows: at most ${maxPendingFlows}` }],
      );
    }
    // The start route beside the registered callback: the public address Xero already knows, where
    // the request's own URL may be an internal one behind a proxy.
    const url = new URL('./start', config.redirectUri);
    url.search = new URLSearchParams({ link: minted.token }).toString();
    return c.json({ url: url.toString(), expiresAt: minted.expiresAt.toISOString() }, 201);
  });

  return routes;
}
