import { type DeprecatedVariable, type Env, int, parseEnv, renameVariables } from '@honest-health/platform';
import {
  _default,
  object,
  optional,
  pipe,
  refine,
  string,
  superRefine,
  transform,
  enum as zenum,
} from 'zod/mini';
import { DEFAULT_XERO_SCOPES, missingInvoiceScope } from './connections/scopes.js';
import { shortenedXeroBudget, XERO_BUDGET, type XeroBudget } from './push/budget.js';
import { DEFAULT_CLAIM_PAYLOAD_BYTES } from './push/claim-bytes.js';

export interface AppConfig {
  /** Base64 of 32 bytes; undefined only with the embedded database, where a development key is made. */
  tokenEncryptionKey: string | undefined;
  /** Keys that only open: what TOKEN_ENCRYPTION_KEY was before a rotation, until `tokens:reseal` ran. */
  previousTokenEncryptionKeys: string[];
  xero: XeroConfig;
  tickIntervalMs: number;
  /** How often the API keys are reloaded (API_KEY_REFRESH_MS): how long a revoked key keeps working. */
  apiKeyRefreshMs: number;
  pushMaxAttempts: number;
  pushBatchSize: number;
  /** The most invoice bytes one claim returns (PUSH_CLAIM_MAX_PAYLOAD_BYTES). */
  pushClaimMaxPayloadBytes: number;
  backoff: { baseMs: number; maxMs: number };
  /** Days pushed and dead pushes are kept (the retention tick); undefined: kept for ever. */
  pushRetentionDays: number | undefined;
  /** Xero's limits, shared by every replica through Postgres; windows shortened only by test settings. */
  xeroBudget: XeroBudget;
  /** How often an idle grant's refresh token is used, so that it never reaches Xero's 60 days unused. */
  refreshKeepAliveMs: number;
  limits: ApiLimits;
  webhooks: WebhookConfig;
  /** Variables set under an old name, for a warning at boot. */
  deprecatedVariables: DeprecatedVariable[];
}

/** Webhook deliveries (docs/api.md, "Webhooks"). */
export interface WebhookConfig {
  /** WEBHOOK_ALLOW_INSECURE: http and loopback receivers, for tests and local development only. */
  allowInsecure: boolean;
  timeoutMs: number;
  retryForMs: number;
  backoff: { baseMs: number; maxMs: number };
  maxResponseBytes: number;
  /** How long the previous secret still signs after a rotation. */
  secretOverlapMs: number;
}

/** What one API key and one organization may do (docs/api.md, "Limits and quotas"). */
export interface ApiLimits {
  rate: { perMinute: number; burst: number };
  maxPendingInvoices: number;
  /** Bytes of unfinished invoices one organization may hold. */
  maxPendingBytes: number;
  maxPendingConnectFlows: number;
  /** Request-body bytes being read or handled at once in this process or isolate. */
  bodiesMaxBytes: number;
  /** What one client address may ask of the unauthenticated connect pages. */
  clientRate: { perMinute: number; burst: number };
}

export interface XeroConfig {
  apiUrl: string;
  identityUrl: string;
  /** Where the browser is sent to approve the connection (login.xero.com, not identity.xero.com). */
  authorizeUrl: string;
  /** This server's callback, registered with the Xero app. */
  redirectUri: string;
  scopes: string;
  clientId: string | undefined;
  clientSecret: string | undefined;
  timeoutMs: number;
}

// The client secret, codes and tokens travel to these URLs: TLS, as OAuth requires of the token
// endpoint and the redirect (RFC 6749 sections 3.1.2.1, 3.2). Plain http only to this machine
// (a local sandbox; RFC 8252 section 8.3 allows it for a loopback redirect).
const LOOPBACK_HOST = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/;
const isTransportSafe = (url: URL) =>
  url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK_HOST.test(url.hostname));

const httpsUrl = (fallback: string) =>
  pipe(
    _default(optional(string()), fallback).check(
      refine((v) => /^https?:\/\//.test(v) && URL.canParse(v) && isTransportSafe(new URL(v)), {
        message: 'must be an https:// URL (http:// only for a loopback host: localhost, 127.0.0.0/8, [::1])',
      }),
    ),
    transform((v: string) => v.replace(/\/+$/, '')),
  );

const KEY_PATTERN = /^[A-Za-z0-9+/]{43}=$/;

const base64Key = optional(string()).check(
  refine((v) => v === undefined || KEY_PATTERN.test(v), {
    message: 'must be 32 bytes, base64-encoded (openssl rand -base64 32)',
  }),
);

// Comma-separated (spaces around the commas allowed); empty entries are ignored.
const base64Keys = pipe(
  optional(string()).check(
    refine(
      (v) => v === undefined || v.split(',').every((k) => k.trim() === '' || KEY_PATTERN.test(k.trim())),
      {
        message: 'must be comma-separated keys of 32 bytes, base64-encoded (openssl rand -base64 32)',
      },
    ),
  ),
  transform((v: string | undefined) =>
    (v ?? '')
      .split(',')
      .map((k) => k.trim())
      .filter((k) => k !== ''),
  ),
);

const schema = object({
  DATABASE_URL: optional(string()),
  TOKEN_ENCRYPTION_KEY: base64Key,
  TOKEN_ENCRYPTION_KEYS_PREVIOUS: base64Keys,
  XERO_API_URL: httpsUrl('https://api.xero.com'),
  XERO_IDENTITY_URL: httpsUrl('https://identity.xero.com'),
  XERO_AUTHORIZE_URL: httpsUrl('https://login.xero.com/identity/connect/authorize'),
  XERO_REDIRECT_URI: httpsUrl('http://localhost:8080/connect/xero/callback'),
  XERO_SCOPES: _default(optional(string()), DEFAULT_XERO_SCOPES),
  XERO_CLIENT_ID: optional(string()),
  XERO_CLIENT_SECRET: optional(string()),
  XERO_TIMEOUT_MS: int(100, 120_000, 10_000),
  TICK_INTERVAL_MS: int(100, 3_600_000, 60_000),
  API_KEY_REFRESH_MS: int(100, 3_600_000, 5000),
  PUSH_MAX_ATTEMPTS: int(1, 1000, 12),
  PUSH_BATCH_SIZE: int(1, 1000, 50),
  // The invoices' JSON text one claim returns, at most: neon-http answers at most 10 MB, and the text
  // travels there JSON-escaped. At least one invoice's largest (1 MiB, stored as jsonb's text).
  PUSH_CLAIM_MAX_PAYLOAD_BYTES: int(2 * 1024 * 1024, 8 * 1024 * 1024, DEFAULT_CLAIM_PAYLOAD_BYTES),
  PUSH_BACKOFF_BASE_MS: int(10, 3_600_000, 30_000),
  PUSH_BACKOFF_MAX_MS: int(10, 86_400_000, 3_600_000),
  // Xero: "Unused refresh tokens expire after 60 days" (developer.xero.com/faq/oauth2). At most 30, so
  // a grant whose refreshes fail still has a month of back-offs and alerts before its consent is lost.
  XERO_REFRESH_KEEP_ALIVE_DAYS: int(1, 30, 7),
  // Off when unset: pushed and dead pushes older than this many days are deleted by the retention tick.
  PUSH_RETENTION_DAYS: int(1, 36_500, undefined),
  // Tests and benchmarks only: shorter windows for Xero's minute and day (the sandbox shortened alike).
  // Production leaves them unset and counts Xero's real 60 s and 24 h.
  XERO_BUDGET_TEST_MINUTE_MS: int(100, 60_000, 60_000),
  XERO_BUDGET_TEST_DAY_MS: int(1000, 86_400_000, 86_400_000),
  // Unset: a fifteenth of the test minute. A test whose tick runs beside the servers on a loaded machine
  // gives every one of them the same longer time (budget.ts: they must agree).
  XERO_BUDGET_TEST_SEND_WITHIN_MS: int(10, 2000, undefined),
  API_RATE_PER_MINUTE: int(1, 6_000_000, 600),
  API_RATE_BURST: int(1, 1_000_000, 100),
  ORG_MAX_PENDING_INVOICES: int(1, 100_000_000, 10_000),
  ORG_MAX_PENDING_BYTES: int(1_048_576, 1_099_511_627_776, 1_073_741_824),
  ORG_MAX_PENDING_CONNECT_FLOWS: int(1, 10_000, 20),
  // At least one largest body (1 MiB). 8 MiB by default: a MiB in flight costs 3 to 4 MiB of memory
  // (bench:ingress rss_per_inflight_mib), and a Worker isolate has 128 MB.
  REQUEST_BODIES_MAX_BYTES: int(1_048_576, 4_294_967_296, 8_388_608),
  CONNECT_RATE_PER_MINUTE: int(1, 6_000_000, 60),
  CONNECT_RATE_BURST: int(1, 1_000_000, 20),
  WEBHOOK_ALLOW_INSECURE: _default(
    optional(zenum(['true', 'false'], { error: () => 'must be true or false' })),
    'false',
  ),
  WEBHOOK_TIMEOUT_MS: int(100, 60_000, 10_000),
  WEBHOOK_RETRY_FOR_MS: int(1000, 30 * 86_400_000, 3 * 86_400_000),
  WEBHOOK_BACKOFF_BASE_MS: int(10, 3_600_000, 30_000),
  WEBHOOK_BACKOFF_MAX_MS: int(10, 86_400_000, 6 * 3_600_000),
  WEBHOOK_MAX_RESPONSE_BYTES: int(0, 10 * 1024 * 1024, 64 * 1024),
  WEBHOOK_SECRET_OVERLAP_MS: int(0, 30 * 86_400_000, 86_400_000),
}).check(
  superRefine((e, ctx) => {
    // A real database holds real tokens: they are only ever encrypted with a key the operator owns.
    const embedded = e.DATABASE_URL === undefined || e.DATABASE_URL === 'memory://';
    if (!embedded && e.TOKEN_ENCRYPTION_KEY === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['TOKEN_ENCRYPTION_KEY'],
        message: 'is required when DATABASE_URL is set',
      });
    }
    if (e.TOKEN_ENCRYPTION_KEYS_PREVIOUS.length > 0 && e.TOKEN_ENCRYPTION_KEY === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['TOKEN_ENCRYPTION_KEYS_PREVIOUS'],
        message: 'needs TOKEN_ENCRYPTION_KEY (the key that seals) beside it',
      });
    }
    if ((e.XERO_CLIENT_ID === undefined) !== (e.XERO_CLIENT_SECRET === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['XERO_CLIENT_SECRET'],
        message: 'must be set together with XERO_CLIENT_ID',
      });
    }
    const scopes = e.XERO_SCOPES.split(/\s+/);
    if (!scopes.includes('offline_access') || missingInvoiceScope(e.XERO_SCOPES)) {
      ctx.addIssue({
        code: 'custom',
        path: ['XERO_SCOPES'],
        message: 'must include offline_access and accounting.invoices (or accounting.transactions)',
      });
    }
    // Xero counts its real minute and day: a shortened budget would spend them several times over.
    // (A bad XERO_API_URL is already named above, and does not stop this check.)
    if (URL.canParse(e.XERO_API_URL) && new URL(e.XERO_API_URL).hostname === 'api.xero.com') {
      const shortened = {
        XERO_BUDGET_TEST_MINUTE_MS: e.XERO_BUDGET_TEST_MINUTE_MS !== XERO_BUDGET.minuteMs,
        XERO_BUDGET_TEST_DAY_MS: e.XERO_BUDGET_TEST_DAY_MS !== XERO_BUDGET.dayMs,
        XERO_BUDGET_TEST_SEND_WITHIN_MS: e.XERO_BUDGET_TEST_SEND_WITHIN_MS !== undefined,
      };
      for (const [name, set] of Object.entries(shortened)) {
        if (set)
          ctx.addIssue({
            code: 'custom',
            path: [name],
            message: 'is for the Xero sandbox only, not api.xero.com',
          });
      }
    }
  }),
);

/**
 * Old names still read for one release, with a warning: "registry" and "budget" each meant two things
 * (ARCHITECTURE.md, glossary).
 */
export const RENAMED_VARIABLES = {
  REGISTRY_REFRESH_MS: 'API_KEY_REFRESH_MS',
  REQUEST_BODY_BUDGET_BYTES: 'REQUEST_BODIES_MAX_BYTES',
} as const;

export function loadAppConfig(env: Env): AppConfig {
  const renamed = renameVariables(env, RENAMED_VARIABLES);
  const e = parseEnv(schema, renamed.env, renamed.problems);
  return {
    tokenEncryptionKey: e.TOKEN_ENCRYPTION_KEY,
    previousTokenEncryptionKeys: e.TOKEN_ENCRYPTION_KEYS_PREVIOUS,
    xero: {
      apiUrl: e.XERO_API_URL,
      identityUrl: e.XERO_IDENTITY_URL,
      authorizeUrl: e.XERO_AUTHORIZE_URL,
      redirectUri: e.XERO_REDIRECT_URI,
      scopes: e.XERO_SCOPES,
      clientId: e.XERO_CLIENT_ID,
      clientSecret: e.XERO_CLIENT_SECRET,
      timeoutMs: e.XERO_TIMEOUT_MS,
    },
    tickIntervalMs: e.TICK_INTERVAL_MS,
    apiKeyRefreshMs: e.API_KEY_REFRESH_MS,
    pushMaxAttempts: e.PUSH_MAX_ATTEMPTS,
    pushBatchSize: e.PUSH_BATCH_SIZE,
    pushClaimMaxPayloadBytes: e.PUSH_CLAIM_MAX_PAYLOAD_BYTES,
    backoff: { baseMs: e.PUSH_BACKOFF_BASE_MS, maxMs: e.PUSH_BACKOFF_MAX_MS },
    pushRetentionDays: e.PUSH_RETENTION_DAYS,
    xeroBudget: shortenedXeroBudget(
      e.XERO_BUDGET_TEST_MINUTE_MS,
      e.XERO_BUDGET_TEST_DAY_MS,
      e.XERO_BUDGET_TEST_SEND_WITHIN_MS,
    ),
    refreshKeepAliveMs: e.XERO_REFRESH_KEEP_ALIVE_DAYS * 86_400_000,
    limits: {
      rate: { perMinute: e.API_RATE_PER_MINUTE, burst: e.API_RATE_BURST },
      maxPendingInvoices: e.ORG_MAX_PENDING_INVOICES,
      maxPendingBytes: e.ORG_MAX_PENDING_BYTES,
      maxPendingConnectFlows: e.ORG_MAX_PENDING_CONNECT_FLOWS,
      bodiesMaxBytes: e.REQUEST_BODIES_MAX_BYTES,
      clientRate: { perMinute: e.CONNECT_RATE_PER_MINUTE, burst: e.CONNECT_RATE_BURST },
    },
    webhooks: {
      allowInsecure: e.WEBHOOK_ALLOW_INSECURE === 'true',
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      retryForMs: e.WEBHOOK_RETRY_FOR_MS,
      backoff: { baseMs: e.WEBHOOK_BACKOFF_BASE_MS, maxMs: e.WEBHOOK_BACKOFF_MAX_MS },
      maxResponseBytes: e.WEBHOOK_MAX_RESPONSE_BYTES,
      secretOverlapMs: e.WEBHOOK_SECRET_OVERLAP_MS,
    },
    deprecatedVariables: renamed.deprecated,
  };
}
