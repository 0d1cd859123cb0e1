// The identity server's model: authorization codes, grants (Xero's "auth events") with their tenant
// connections, and the access/refresh tokens issued for them, including refresh-token rotation with
// Xero's 30-minute grace period for the token just rotated away.
import { fakeJwt, randomToken, sha256Base64url, uuid } from './ids.js';

export const ACCESS_TOKEN_TTL_S = 1800;
export const ID_TOKEN_TTL_S = 300;
export const AUTH_CODE_TTL_MS = 5 * 60_000;
export const REFRESH_GRACE_MS = 30 * 60_000;
export const REFRESH_TOKEN_TTL_MS = 60 * 86_400_000;
const ISSUER = 'https://identity.xero.com';

export interface SandboxClient {
  clientId: string;
  clientSecret: string;
  /** Allowed redirect URIs; `null` accepts any absolute http(s) URI. */
  redirectUris: string[] | null;
}

export interface SandboxUser {
  userId: string;
  email: string;
  givenName: string;
  familyName: string;
}

export interface Connection {
  id: string;
  tenantId: string;
  authEventId: string;
  createdAt: number;
  updatedAt: number;
}

export interface TokenPair {
  accessToken: string;
  /** `null` when the grant's scope lacks offline_access (Xero issues no refresh token then). */
  refreshToken: string | null;
  idToken: string | null;
  issuedAt: number;
  accessExpiresAt: number;
}

/**
 * One completed authorization: Xero's "auth event". Its token pair is the only one it has (one pair per
 * grant, shared by all its tenants), and `connections` holds the tenants whose connection it made or
 * most recently renewed. A connection is the user's (one per tenant, whatever grant): authorizing a
 * tenant again moves its connection to the new grant, keeping its `id` and `createdDateUtc`.
 */
export interface Grant {
  authEventId: string;
  clientId: string;
  userId: string;
  scope: string[];
  nonce: string | null;
  createdAt: number;
  revokedAt: number | null;
  connections: Map<string, Connection>;
  /** The newest token pair issued (a grace-window reuse issues one too, forking the chain). */
  current: TokenPair;
}

interface AuthCode {
  clientId: string;
  redirectUri: string;
  scope: string[];
  tenantIds: string[];
  nonce: string | null;
  codeChallenge: string | null;
  codeChallengeMethod: string | null;
  expiresAt: number;
  used: boolean;
}

interface RefreshRecord {
  authEventId: string;
  clientId: string;
  issuedAt: number;
  expiresAt: number;
  supersededAt: number | null;
}

interface AccessRecord {
  authEventId: string;
  expiresAt: number;
}

export type GrantResult =
  | { ok: true; grant: Grant; pair: TokenPair; reused: boolean }
  | { ok: false; reason: string };

export type Authentication =
  | { ok: true; grant: Grant }
  | { ok: false; reason: 'missing' | 'unknown' }
  | { ok: false; reason: 'expired'; expiredAt: number };

export function parseScope(scope: string): string[] {
  return scope.split(/\s+/).filter(Boolean);
}

export class IdentityModel {
  readonly user: SandboxUser;
  readonly #codes = new Map<string, AuthCode>();
  readonly #grants = new Map<string, Grant>();
  readonly #refresh = new Map<string, RefreshRecord>();
  readonly #access = new Map<string, AccessRecord>();

  constructor(user: SandboxUser) {
    this.user = user;
  }

  clear(): void {
    this.#codes.clear();
    this.#grants.clear();
    this.#refresh.clear();
    this.#access.clear();
  }

  issueCode(input: Omit<AuthCode, 'expiresAt' | 'used'>, now: number): string {
    const code = randomToken(32);
    this.#codes.set(code, { ...input, expiresAt: now + AUTH_CODE_TTL_MS, used: false });
    return code;
  }

  async redeemCode(
    input: { code: string; clientId: string; redirectUri: string; codeVerifier: string | null },
    now: number,
  ): Promise<GrantResult> {
    const code = this.#codes.get(input.code);
    if (!code) return { ok: false, reason: 'unknown authorization code' };
    if (code.used) return { ok: false, reason: 'authorization code already used' };
    if (now >= code.expiresAt) return { ok: false, reason: 'authorization code expired' };
    if (code.clientId !== input.clientId)
      return { ok: false, reason: 'authorization code issued to another client' };
    if (code.redirectUri !== input.redirectUri)
      return { ok: false, reason: 'redirect_uri does not match the authorize request' };
    if (code.codeChallenge !== null) {
      if (!input.codeVerifier) return { ok: false, reason: 'code_verifier required (PKCE)' };
      const derived =
        code.codeChallengeMethod === 'plain' ? input.codeVerifier : await sha256Base64url(input.codeVerifier);
      if (derived !== code.codeChallenge)
        return { ok: false, reason: 'code_verifier does not match code_challenge' };
    }
    code.used = true;
    const grant = this.createGrant(
      { clientId: code.clientId, scope: code.scope, tenantIds: code.tenantIds, nonce: code.nonce },
      now,
    );
    return { ok: true, grant, pair: grant.current, reused: false };
  }

  createGrant(
    input: { clientId: string; scope: string[]; tenantIds: string[]; nonce?: string | null },
    now: number,
  ): Grant {
    const authEventId = uuid();
    const grant: Grant = {
      authEventId,
      clientId: input.clientId,
      userId: this.user.userId,
      scope: input.scope,
      nonce: input.nonce ?? null,
      createdAt: now,
      revokedAt: null,
      connections: new Map(),
      current: undefined as unknown as TokenPair,
    };
    for (const tenantId of input.tenantIds) this.connect(grant, tenantId, now);
    this.#grants.set(authEventId, grant);
    this.#issuePair(grant, now);
    return grant;
  }

  connect(grant: Grant, tenantId: string, now: number): Connection {
    const existing = grant.connections.get(tenantId);
    if (existing) return existing;
    // The user's connection to this tenant, if another live grant of this client made it.
    const previous = this.userConnections(grant.clientId).find((c) => c.tenantId === tenantId);
    if (previous) this.#grants.get(previous.authEventId)?.connections.delete(tenantId);
    const connection = {
      id: previous?.id ?? uuid(),
      tenantId,
      authEventId: grant.authEventId,
      createdAt: previous?.createdAt ?? now,
      updatedAt: now,
    };
    grant.connections.set(tenantId, connection);
    return connection;
  }

  /** Every connection the user has to this client's app, across its live grants (GET /connections). */
  userConnections(clientId: string): Connection[] {
    return [...this.#grants.values()]
      .filter((g) => g.clientId === clientId && g.revokedAt === null)
      .flatMap((g) => [...g.connections.values()]);
  }

  /** DELETE /connections/{id}: drops that one tenant; the grant, its tokens and other tenants stay. */
  deleteConnection(clientId: string, connectionId: string): Connection | undefined {
    for (const grant of this.#grants.values()) {
      if (grant.clientId !== clientId || grant.revokedAt !== null) continue;
      for (const connection of grant.connections.values()) {
        if (connection.id === connectionId) {
          grant.connections.delete(connection.tenantId);
          return connection;
        }
      }
    }
    return undefined;
  }

  refresh(token: string, clientId: string, now: number): GrantResult {
    const record = this.#refresh.get(token);
    if (!record) return { ok: false, reason: 'unknown refresh token' };
    if (record.clientId !== clientId)
      return { ok: false, reason: 'refresh token was issued to another client' };
    const grant = this.#grants.get(record.authEventId);
    if (!grant || grant.revokedAt !== null) return { ok: false, reason: 'refresh token revoked' };
    if (record.supersededAt === null) {
      if (now >= record.expiresAt) return { ok: false, reason: 'refresh token expired (unused for 60 days)' };
      record.supersededAt = now;
      return { ok: true, grant, pair: this.#issuePair(grant, now), reused: false };
    }
    // Inside the grace window a reuse is a refresh like any other: a fresh pair, so two redemptions
    // of one token fork the chain (both new refresh tokens live). developer.xero.com/faq/oauth2: "If
    // you don't receive a response from a token refresh you can retry using your existing refresh
    // token for up to 30 minutes"; Xero's official reply in community.xero.com/developer/discussion/
    // 105714701: "If you perform a token refresh successfully you get a new refresh token with the new
    // access token"; its community manager in discussion/127920775: within the grace period "the same
    // token can be used as many times as needed". None of them says a reuse answers with an old pair.
    if (now < record.supersededAt + REFRESH_GRACE_MS)
      return { ok: true, grant, pair: this.#issuePair(grant, now), reused: true };
    return { ok: false, reason: 'refresh token already rotated and its 30-minute grace period is over' };
  }

  authenticate(authorization: string | undefined, now: number): Authentication {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (!match) return { ok: false, reason: 'missing' };
    const record = this.#access.get(match[1] as string);
    const grant = record && this.#grants.get(record.authEventId);
    if (!record || !grant) return { ok: false, reason: 'unknown' };
    if (now >= record.expiresAt) return { ok: false, reason: 'expired', expiredAt: record.expiresAt };
    return { ok: true, grant };
  }

  /**
   * Revocation as Xero does it: the grant the refresh token belongs to is revoked, and every connection
   * of that user to the app goes, whichever grant made it ("Revokes a users refresh token and removes
   * all their connections to your app", xero-node README, revokeToken). The user's other grants keep
   * their tokens but reach no tenant (Xero is silent on those tokens: README table).
   */
  revokeRefreshToken(token: string, clientId: string | null, now: number): boolean {
    const record = this.#refresh.get(token);
    if (!record || (clientId !== null && record.clientId !== clientId)) return false;
    const grant = this.#grants.get(record.authEventId);
    if (!this.revokeGrant(record.authEventId, now) || !grant) return false;
    for (const other of this.#grants.values())
      if (other.clientId === grant.clientId && other.userId === grant.userId) other.connections.clear();
    return true;
  }

  /** One grant only (its refreshes, its connections): a control-API lever, not what revocation does. */
  revokeGrant(authEventId: string, now: number): boolean {
    const grant = this.#grants.get(authEventId);
    if (!grant || grant.revokedAt !== null) return false;
    grant.revokedAt = now;
    grant.connections.clear();
    return true;
  }

  grant(authEventId: string): Grant | undefined {
    return this.#grants.get(authEventId);
  }

  grants(): Grant[] {
    return [...this.#grants.values()];
  }

  /** Drops a tenant from every grant (the organisation was deleted). */
  disconnectTenant(tenantId: string): void {
    for (const grant of this.#grants.values()) grant.connections.delete(tenantId);
  }

  /** The token endpoint's JSON for a pair; expires_in counts down for a pair handed out again. */
  tokenResponse(grant: Grant, pair: TokenPair, now: number): Record<string, unknown> {
    return {
      ...(pair.idToken ? { id_token: pair.idToken } : {}),
      access_token: pair.accessToken,
      expires_in: Math.max(0, Math.ceil((pair.accessExpiresAt - now) / 1000)),
      token_type: 'Bearer',
      ...(pair.refreshToken ? { refresh_token: pair.refreshToken } : {}),
      scope: grant.scope.join(' '),
    };
  }

  #issuePair(grant: Grant, now: number): TokenPair {
    const iat = Math.floor(now / 1000);
    const sessionId = uuid();
    const accessToken = fakeJwt({
      nbf: iat,
      exp: iat + ACCESS_TOKEN_TTL_S,
      iss: ISSUER,
      aud: `${ISSUER}/resources`,
      client_id: grant.clientId,
      sub: grant.userId,
      auth_time: Math.floor(grant.createdAt / 1000),
      xero_userid: grant.userId,
      global_session_id: sessionId,
      sid: sessionId,
      jti: uuid(),
      authentication_event_id: grant.authEventId,
      scope: grant.scope,
    });
    const idToken = grant.scope.includes('openid')
      ? fakeJwt({
          nbf: iat,
          exp: iat + ID_TOKEN_TTL_S,
          iss: ISSUER,
          aud: grant.clientId,
          iat,
          sid: sessionId,
          sub: grant.userId,
          auth_time: Math.floor(grant.createdAt / 1000),
          xero_userid: grant.userId,
          global_session_id: sessionId,
          preferred_username: this.user.email,
          email: this.user.email,
          given_name: this.user.givenName,
          family_name: this.user.familyName,
          ...(grant.nonce ? { nonce: grant.nonce } : {}),
        })
      : null;
    const refreshToken = grant.scope.includes('offline_access') ? randomToken(32) : null;
    const pair: TokenPair = {
      accessToken,
      refreshToken,
      idToken,
      issuedAt: now,
      accessExpiresAt: now + ACCESS_TOKEN_TTL_S * 1000,
    };
    this.#access.set(accessToken, { authEventId: grant.authEventId, expiresAt: pair.accessExpiresAt });
    if (refreshToken) {
      this.#refresh.set(refreshToken, {
        authEventId: grant.authEventId,
        clientId: grant.clientId,
        issuedAt: now,
        expiresAt: now + REFRESH_TOKEN_TTL_MS,
        supersededAt: null,
      });
    }
    grant.current = pair;
    return pair;
  }
}
