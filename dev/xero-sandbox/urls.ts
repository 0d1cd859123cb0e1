// Where things live on a sandbox origin, and which "target" (for faults and call counting) a path is.
// Real Xero splits these over login.xero.com, identity.xero.com and api.xero.com; the sandbox serves them
// all from one origin under the same paths, with the identity host mounted at /identity.

export const IDENTITY_PREFIX = '/identity';
export const AUTHORIZE_PATH = `${IDENTITY_PREFIX}/connect/authorize`;
export const TOKEN_PATH = `${IDENTITY_PREFIX}/connect/token`;
export const REVOCATION_PATH = `${IDENTITY_PREFIX}/connect/revocation`;
export const CONNECTIONS_PATH = '/connections';
export const API_PREFIX = '/api.xro/2.0';
export const CONTROL_PREFIX = '/_control';

export interface SandboxUrls {
  /** The origin, e.g. http://127.0.0.1:4010 */
  url: string;
  /** Stands in for https://identity.xero.com (and login.xero.com/identity for authorize). */
  identityBaseUrl: string;
  authorizeUrl: string;
  tokenUrl: string;
  revocationUrl: string;
  /** Stands in for https://api.xero.com/connections */
  connectionsUrl: string;
  /** Stands in for https://api.xero.com/api.xro/2.0 */
  apiBaseUrl: string;
  controlUrl: string;
}

export function sandboxUrls(origin: string): SandboxUrls {
  const url = origin.replace(/\/+$/, '');
  return {
    url,
    identityBaseUrl: `${url}${IDENTITY_PREFIX}`,
    authorizeUrl: `${url}${AUTHORIZE_PATH}`,
    tokenUrl: `${url}${TOKEN_PATH}`,
    revocationUrl: `${url}${REVOCATION_PATH}`,
    connectionsUrl: `${url}${CONNECTIONS_PATH}`,
    apiBaseUrl: `${url}${API_PREFIX}`,
    controlUrl: `${url}${CONTROL_PREFIX}`,
  };
}

/** What a request is aimed at; `null` for the control API, which faults and stats never touch. */
export type RouteTarget = 'authorize' | 'token' | 'revocation' | 'connections' | 'invoices' | 'api' | 'other';

export function routeTarget(path: string): RouteTarget | null {
  if (path === CONTROL_PREFIX || path.startsWith(`${CONTROL_PREFIX}/`)) return null;
  if (path === AUTHORIZE_PATH) return 'authorize';
  if (path === TOKEN_PATH) return 'token';
  if (path === REVOCATION_PATH) return 'revocation';
  if (path === CONNECTIONS_PATH || path.startsWith(`${CONNECTIONS_PATH}/`)) return 'connections';
  if (path === `${API_PREFIX}/Invoices` || path.startsWith(`${API_PREFIX}/Invoices/`)) return 'invoices';
  if (path.startsWith(`${API_PREFIX}/`)) return 'api';
  return 'other';
}
