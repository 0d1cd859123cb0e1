import { Hono } from 'hono';
import type { AuthEnv } from '../auth.js';
import type { XeroConfig } from '../config.js';
import { ApiError } from '../errors.js';
import { LINK_TTL_MS, MAX_PENDING_LINKS, mintLink } from './connect-links.js';

/**
 * POST /api/connect-links (behind the API key): a one-time link a browser opens to connect Xero.
 * The link is a bearer credential until a browser opens it; from then on the flow is bound to that
 * browser (connect-routes.ts).
 */
export function connectLinkRoutes(deps: { config: XeroConfig }) {
  const { config } = deps;
  const routes = new Hono<AuthEnv>();

  routes.post('/', async (c) => {
    if (!config.clientId)
      throw new ApiError(503, 'xero_not_configured', 'Xero is not configured on this server');
    const organization = c.get('organization');
    const minted = await c.var.idempotent((db) => mintLink(db, organization.id));
    if (minted.kind === 'too_many') {
      throw new ApiError(
        429,
        'too_many_connect_links',
        `at most ${MAX_PENDING_LINKS} unopened connect links at a time; they expire ${LINK_TTL_MS / 60_000} minutes after minting`,
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
