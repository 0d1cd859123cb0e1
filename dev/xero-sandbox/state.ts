// The sandbox's in-memory world: clock, tenants (organisations) with their contacts and invoices, the
// identity model, rate limiter, idempotency store, pending faults and stats. Tests may drive it directly.
import { Clock } from './clock.js';
import { FaultQueue } from './faults.js';
import { IdempotencyStore } from './idempotency.js';
import { uuid } from './ids.js';
import type { Contact, Invoice } from './invoice-model.js';
import { type Grant, IdentityModel, parseScope, type SandboxClient } from './oauth.js';
import { RateLimiter, type RateLimits, XERO_LIMITS } from './rate-limit.js';
import { emptyStats, type SandboxStats } from './stats.js';

export const DEFAULT_CLIENT_ID = 'sandbox-client';
export const DEFAULT_CLIENT_SECRET = 'sandbox-secret';
export const DEFAULT_TENANT_NAME = 'Demo Company (Sandbox)';
export const DEFAULT_SCOPE =
  'openid profile email accounting.invoices accounting.contacts accounting.settings offline_access';
/** A slice of Xero's default chart of accounts: revenue 200/260/270, cost of sales 310, expenses 4xx. */
export const DEFAULT_ACCOUNT_CODES =
  '200 260 270 310 400 404 408 412 420 429 433 453 461 469 473 477 485 489 493'.split(' ');

export interface TenantInput {
  name: string;
  /** Defaults to a random UUID, as Xero's tenant ids are. */
  id?: string;
  baseCurrency?: string;
  countryCode?: string;
  /** Account codes line items may use; default DEFAULT_ACCOUNT_CODES; `null` accepts any code. */
  accountCodes?: string[] | null;
  /** Whether authorizations connect this tenant when no plan says otherwise (default true). */
  connectOnAuthorize?: boolean;
}

export interface Tenant {
  id: string;
  name: string;
  tenantType: 'ORGANISATION';
  shortCode: string;
  baseCurrency: string;
  countryCode: string;
  /** `null`: any AccountCode is accepted. */
  accountCodes: Set<string> | null;
  connectOnAuthorize: boolean;
  createdAt: number;
  contacts: Map<string, Contact>;
  invoices: Map<string, Invoice>;
  /** Lower-cased ACCREC invoice numbers in use. */
  invoiceNumbers: Set<string>;
  nextInvoiceNumber: number;
}

export interface SandboxOptions {
  /** Base clock (ms since epoch); the control API's clock advance is added on top. Default Date.now. */
  now?: () => number;
  clientId?: string;
  clientSecret?: string;
  /** Redirect URIs the client may use; default: any absolute http(s) URI. */
  redirectUris?: string[];
  /** The envelope's ProviderName (Xero puts the app's name there). */
  providerName?: string;
  limits?: Partial<RateLimits>;
  /** Tenants present from the start (and again after reset). */
  tenants?: TenantInput[];
  /** Name of the tenant an authorization creates when no tenant exists yet. */
  defaultTenantName?: string;
  user?: { email?: string; givenName?: string; familyName?: string };
  /**
   * Show a person the consent page (pick or create the organisation, allow or cancel) at authorize,
   * as Xero does; default false: each authorize is approved at once, for tests and scripts. A queued
   * plan skips the page either way.
   */
  consentPage?: boolean;
}

/** What the next authorization does, queued through the control API. */
export interface AuthorizePlan {
  /** Redirect with error=access_denied, as if the user clicked Cancel. */
  deny: boolean;
  /** Tenants to connect; `null`: every tenant with connectOnAuthorize (creating the default one if none). */
  tenantIds: string[] | null;
  /** Grant these scopes instead of the requested ones (to test a client's check of what was granted). */
  grantScope?: string | null;
}

export class SandboxState {
  readonly options: SandboxOptions;
  readonly clock: Clock;
  readonly client: SandboxClient;
  readonly providerName: string;
  readonly faults = new FaultQueue();
  readonly limiter: RateLimiter;
  readonly idempotency = new IdempotencyStore();
  readonly identity: IdentityModel;
  readonly tenants = new Map<string, Tenant>();
  readonly authorizePlans: AuthorizePlan[] = [];
  stats: SandboxStats = emptyStats();
  readonly #shutdown = new AbortController();

  constructor(options: SandboxOptions = {}) {
    this.options = options;
    this.clock = new Clock(options.now);
    this.client = {
      clientId: options.clientId ?? DEFAULT_CLIENT_ID,
      clientSecret: options.clientSecret ?? DEFAULT_CLIENT_SECRET,
      redirectUris: options.redirectUris ?? null,
    };
    this.providerName = options.providerName ?? 'Xero Sandbox';
    this.limiter = new RateLimiter({ ...XERO_LIMITS, ...options.limits });
    this.identity = new IdentityModel({
      userId: uuid(),
      email: options.user?.email ?? 'sandbox.user@example.com',
      givenName: options.user?.givenName ?? 'Sandbox',
      familyName: options.user?.familyName ?? 'User',
    });
    for (const tenant of options.tenants ?? []) this.createTenant(tenant);
  }

  now(): number {
    return this.clock.now();
  }

  /** Aborts when the sandbox closes: pending 'hang' faults end early. */
  get shutdownSignal(): AbortSignal {
    return this.#shutdown.signal;
  }

  close(): void {
    this.#shutdown.abort();
  }

  createTenant(input: TenantInput): Tenant {
    const id = input.id ?? uuid();
    if (this.tenants.has(id)) throw new Error(`tenant ${id} already exists`);
    const tenant: Tenant = {
      id,
      name: input.name,
      tenantType: 'ORGANISATION',
      shortCode: `!${id.replace(/[^a-zA-Z0-9]/g, '').slice(0, 5)}`,
      baseCurrency: (input.baseCurrency ?? 'USD').toUpperCase(),
      countryCode: input.countryCode ?? 'US',
      accountCodes: input.accountCodes === null ? null : new Set(input.accountCodes ?? DEFAULT_ACCOUNT_CODES),
      connectOnAuthorize: input.connectOnAuthorize ?? true,
      createdAt: this.now(),
      contacts: new Map(),
      invoices: new Map(),
      invoiceNumbers: new Set(),
      nextInvoiceNumber: 0,
    };
    this.tenants.set(id, tenant);
    return tenant;
  }

  /** The tenants an authorization connects when its plan does not name them. */
  defaultTenantIds(): string[] {
    const ids = [...this.tenants.values()].filter((t) => t.connectOnAuthorize).map((t) => t.id);
    if (ids.length > 0) return ids;
    if (this.tenants.size === 0)
      return [this.createTenant({ name: this.options.defaultTenantName ?? DEFAULT_TENANT_NAME }).id];
    return [];
  }

  /**
   * Skips the browser: a grant as if the user had authorized, with tokens ready to use. Handy to seed a
   * client with a refresh token.
   */
  createGrant(input: { scope?: string; tenantIds?: string[] } = {}): {
    grant: Grant;
    tokens: Record<string, unknown>;
  } {
    const tenantIds = input.tenantIds ?? this.defaultTenantIds();
    for (const id of tenantIds) if (!this.tenants.has(id)) throw new Error(`unknown tenant ${id}`);
    const now = this.now();
    const grant = this.identity.createGrant(
      { clientId: this.client.clientId, scope: parseScope(input.scope ?? DEFAULT_SCOPE), tenantIds },
      now,
    );
    return { grant, tokens: this.identity.tokenResponse(grant, grant.current, now) };
  }

  setLimits(limits: Partial<RateLimits>): RateLimits {
    this.limiter.limits = { ...this.limiter.limits, ...limits };
    return { ...this.limiter.limits };
  }

  statsSnapshot(): SandboxStats {
    return structuredClone(this.stats);
  }

  /** Back to the state right after construction: configured tenants only, no tokens, no faults, zero stats. */
  reset(): void {
    this.clock.reset();
    this.faults.clear();
    this.limiter.reset({ ...XERO_LIMITS, ...this.options.limits });
    this.idempotency.clear();
    this.identity.clear();
    this.tenants.clear();
    this.authorizePlans.length = 0;
    this.stats = emptyStats();
    for (const tenant of this.options.tenants ?? []) this.createTenant(tenant);
  }
}
