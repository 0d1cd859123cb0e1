import { Hono, type Logger } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import type { Context } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import type { AuthEnv } from '../auth.js';
import type { XeroConfig } from '../config.js';
import { ApiError, errorBody } from '../errors.js';
import { KeyRateLimiter, limitClientRate, type RateLimitConfig } from '../rate-limit.js';
import { authEventIdOf, type XeroClient } from '../xero/client.js';
import {
  type ConnectResult,
  confirmation,
  confirmPage,
  errorPage,
  successPage,
  wantsJson,
} from './callback-page.js';
import { saveGrant } from './grants.js';
import { consumeState, isWellFormedToken, randomToken, STATE_TTL_MS, startFlow } from './oauth-state.js';
import { missingInvoiceScope } from './scopes.js';

export interface ConnectRoutesDeps {
  xero: XeroClient;
  config: XeroConfig;
  box: SecretBox;
  log: Logger;
  /** Scheduled once a connection is stored: invoices that waited for one can be pushed now. */
  pushTick: string;
  /** CONNECT_RATE_PER_MINUTE, CONNECT_RATE_BURST: what one client address may ask of these pages. */
  clientRate?: RateLimitConfig;
}

const invalidLink = (message: string) =>
  new ApiError(400, 'invalid_link', `the connect link is ${message}; mint a new one`, [
    { path: 'link', message },
  ]);

/** Binds a flow to the browser that opened the link (RFC 9700 §4.7.1: CSRF protection bound to the user agent). */
export const FLOW_COOKIE = 'xero_connect';

/**
 * The OAuth connect flow, started from a one-time link (POST /api/connect-links):
 * - GET /connect/xero/start?link=… shows a page whose button POSTs to the same address, which spends
 *   the link, sets a cookie binding this browser to a new state with a PKCE S256 verifier, and
 *   redirects to Xero;
 * - GET /connect/xero/callback needs that cookie, spends the state, and exchanges the code with the
 *   verifier, so a code issued for another flow is refused by Xero (RFC 7636 §4.6, RFC 9700 §4.5).
 * Tokens are stored encrypted, one connection per tenant the user approved; none receives invoices
 * until the organization confirms it with its API key.
 */
export function connectRoutes(deps: ConnectRoutesDeps) {
  const { config, xero, box, log } = deps;
  const routes = new Hono<AuthEnv>();
  const clientRate = deps.clientRate ?? { perMinute: 60, burst: 20 };
  routes.use('/xero/*', limitClientRate(new KeyRateLimiter(clientRate), clientRate));
  // The cookie lives beside the callback only, at the public path Xero redirects to.
  const cookiePath = new URL('.', config.redirectUri).pathname.replace(/\/$/, '') || '/';
  const secureCookie = (c: Context) =>
    config.redirectUri.startsWith('https:') || new URL(c.req.url).protocol === 'https:';
  const clearCookie = (c: Context) =>
    deleteCookie(c, FLOW_COOKIE, {
      path: cookiePath,
      secure: secureCookie(c),
      httpOnly: true,
      sameSite: 'Lax',
    });

  // A start URL bound to nothing but the organization would let whoever follows it connect their own
  // Xero organisation: the path answers 410 with a pointer to connect links.
  routes.get('/xero', () => {
    throw new ApiError(
      410,
      'connect_link_required',
      'GET /connect/xero is gone: mint a one-time link with POST /api/connect-links and open its url in a browser',
    );
  });

  // A link is opened with GET and spent with POST from the page GET shows: whatever prefetches the
  // link (a mail scanner, a chat preview) sees the page and spends nothing. GET reads no database.
  const linkOf = (c: Context): { link: string; clientId: string } => {
    const { clientId } = config;
    if (!clientId) throw new ApiError(503, 'xero_not_configured', 'Xero is not configured on this server');
    const link = c.req.query('link');
    if (!link)
      throw new ApiError(400, 'invalid_link', 'link is required', [{ path: 'link', message: 'required' }]);
    if (!isWellFormedToken(link)) throw invalidLink('not a link this server made');
    return { link, clientId };
  };

  routes.get('/xero/start', async (c) =>
    answer(c, async () => {
      const { link } = linkOf(c);
      c.header('cache-control', 'no-store');
      c.header('referrer-policy', 'no-referrer');
      const action = `?${new URLSearchParams({ link })}`;
      if (wantsJson(c.req.header('accept')))
        return c.json({ confirm: { method: 'POST', url: `${c.req.path}${action}` } });
      return c.html(confirmPage(action));
    }),
  );

  routes.post('/xero/start', async (c) =>
    answer(c, async () => {
      const { link, clientId } = linkOf(c);
      const browser = randomToken();
      const flow = await c.var.withDatabase((db) => startFlow(db, box, { link, browser }));
      if (!flow) throw invalidLink('unknown, used or expired');
      setCookie(c, FLOW_COOKIE, browser, {
        path: cookiePath,
        httpOnly: true,
        sameSite: 'Lax',
        secure: secureCookie(c),
        maxAge: STATE_TTL_MS / 1000,
      });
      const url = new URL(config.authorizeUrl);
      // Xero's "PKCE flow" guide: code_challenge + code_challenge_method=S256 on the authorize URL.
      url.search = new URLSearchParams({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: config.redirectUri,
        scope: config.scopes,
        state: flow.state,
        code_challenge: flow.codeChallenge,
        code_challenge_method: 'S256',
      }).toString();
      c.header('cache-control', 'no-store');
      c.header('referrer-policy', 'no-referrer');
      // 303: the browser follows a POST's redirect with a GET.
      return c.redirect(url.toString(), 303);
    }),
  );

  routes.get('/xero/callback', async (c) =>
    answer(c, async () => {
      const { code, state, error } = c.req.query();
      if (error) throw new ApiError(400, 'xero_denied', 'the connection was not approved in Xero');
      if (!code || !state) {
        throw new ApiError(400, 'invalid_callback', 'code and state are required', [
          ...(code ? [] : [{ path: 'code', message: 'required' }]),
          ...(state ? [] : [{ path: 'state', message: 'required' }]),
        ]);
      }
      if (!isWellFormedToken(state)) {
        throw new ApiError(
          400,
          'invalid_state',
          'the state is not one this server made; start again from a new link',
          [{ path: 'state', message: 'not a state this server made' }],
        );
      }
      // A malformed cookie is no cookie: it cannot name a flow.
      const cookie = getCookie(c, FLOW_COOKIE);
      const browser = isWellFormedToken(cookie) ? cookie : undefined;
      const consumed = await c.var.withDatabase((db) => consumeState(db, box, { state, browser }));
      if (consumed.kind === 'unknown') {
        throw new ApiError(
          400,
          'invalid_state',
          'the state is unknown, used or expired; start again from a new link',
          [{ path: 'state', message: 'unknown, used or expired' }],
        );
      }
      if (consumed.kind === 'other_browser') {
        log.warn('connect callback from a browser that did not open the link: refused');
        throw new ApiError(
          400,
          'invalid_browser',
          'this browser did not open the connect link of this flow; finish in the browser that opened it',
          [
            {
              path: 'cookie',
              message: browser ? `${FLOW_COOKIE} belongs to another flow` : `${FLOW_COOKIE} is missing`,
            },
          ],
        );
      }
      // The state is spent: whatever follows, this browser's binding is done with.
      clearCookie(c);
      const { organizationId, organizationName } = consumed;
      const exchanged = await xero.exchangeCode(code, config.redirectUri, consumed.codeVerifier);
      if (exchanged.kind === 'invalid_grant') {
        // Used, expired, or issued for another flow's code_challenge (a pasted code): Xero says only
        // invalid_grant (RFC 7636 §4.6), and so do we.
        throw new ApiError(
          400,
          'invalid_code',
          'Xero refused the authorization code: it was used, expired, or issued for another flow; start again from a new link',
          [{ path: 'code', message: 'refused by Xero (invalid_grant)' }],
        );
      }
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
        throw new ApiError(
          502,
          'xero_exchange_failed',
          'Xero did not accept this server’s client credentials',
        );
      }
      if (exchanged.kind !== 'ok') {
        throw new ApiError(502, 'xero_exchange_failed', 'Xero did not answer the code exchange; start again');
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
      const saved = await c.var.withDatabase((db) =>
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
      const result: ConnectResult = {
        organization: { id: organizationId, name: organizationName },
        connected: saved.connected,
        refused: saved.refused,
      };
      c.header('cache-control', 'no-store');
      if (wantsJson(c.req.header('accept')))
        return c.json({ ...result, confirmation: confirmation(saved.connected) });
      return c.html(successPage(result));
    }),
  );

  return routes;
}

/** Runs a browser-facing route; its own refusals answer as HTML to a browser, JSON to a script. */
async function answer(c: Context, run: () => Promise<Response>): Promise<Response> {
  try {
    return await run();
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    c.header('cache-control', 'no-store');
    if (wantsJson(c.req.header('accept')))
      return c.json(errorBody(err.code, err.message, err.fields), err.status);
    return c.html(errorPage(err.code, err.message), err.status);
  }
}
