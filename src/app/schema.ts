import { sql } from 'drizzle-orm';
import {
  type AnyPgColumn,
  bigint,
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  unique,
  uuid,
} from 'drizzle-orm/pg-core';

// The platform's tables, which the app's migrations created (0000_init, 0004_tick_health) before the
// platform migrated them itself. Still in the app's schema, so that drizzle-kit does not generate a
// DROP for them: taking them out of the app's snapshot (a migration with no SQL) is the contract step,
// due before the platform changes one of them.
export { healthHeartbeat, tickHealth } from '@honest-health/platform/schema';

const id = () => uuid('id').primaryKey().default(sql`gen_random_uuid()`);
const createdAt = () => timestamp('created_at', { withTimezone: true }).notNull().defaultNow();
const updatedAt = () => timestamp('updated_at', { withTimezone: true }).notNull().defaultNow();

export const organizations = pgTable('organizations', {
  id: id(),
  name: text('name').notNull(),
  // The first API key's sha256, as releases before api_keys read it (expand/contract: kept, and
  // cleared when that key is revoked). Keys live in api_keys; this column is only ever a copy.
  apiKeyHash: text('api_key_hash').unique(),
  // The connection an invoice without `tenantId` goes to, chosen through POST
  // /api/connections/{id}/default. One column, so one default per organization by construction; it
  // clears itself when that connection is deleted. Null: such invoices wait (awaiting_connection).
  defaultConnectionId: uuid('default_connection_id').references((): AnyPgColumn => xeroConnections.id, {
    onDelete: 'set null',
  }),
  createdAt: createdAt(),
});

/**
 * An organization's API keys (several may be active: rotation is create, switch, revoke). Only the
 * sha256 is stored; the key is shown once. `last_used_at` is written by the API-key registry's refresh, at
 * most once a minute per key, never per request.
 */
export const apiKeys = pgTable(
  'api_keys',
  {
    id: id(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organizations.id, { onDelete: 'cascade' }),
    name: text('name').notNull().default('default'),
    keyHash: text('key_hash').notNull().unique(),
    createdAt: createdAt(),
    lastUsedAt: timestamp('last_used_at', { withTimezone: true }),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
  },
  (t) => [index('api_keys_org_idx').on(t.organizationId)],
);

export const GRANT_STATUSES = ['active', 'needs_reauth'] as const;

/**
 * One Xero consent (Xero's "auth event"): the token pair every tenant of that consent shares. Xero's
 * staff: a token set "should be unique and only stored in a single place", so it is refreshed once
 * per grant, never per tenant.
 */
export const xeroGrants = pgTable(
  'xero_grants',
  {
    id: id(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organizations.id, { onDelete: 'cascade' }),
    // The access token's `authentication_event_id` claim; null for grants migrated from per-tenant rows.
    authEventId: text('auth_event_id'),
    scope: text('scope'),
    // AES-256-GCM ciphertexts (iv + ciphertext, base64); keys never touch the database.
    accessTokenEnc: text('access_token_enc'),
    refreshTokenEnc: text('refresh_token_enc').notNull(),
    // The associated data the tokens are sealed under when it is not this row's own (`xero-grant:<id>`):
    // rows migrated from per-tenant connections keep theirs until their first refresh re-seals them.
    sealContext: text('seal_context'),
    accessExpiresAt: timestamp('access_expires_at', { withTimezone: true }),
    tokenVersion: integer('token_version').notNull().default(1),
    status: text('status', { enum: GRANT_STATUSES }).notNull().default('active'),
    refreshLeaseOwner: text('refresh_lease_owner'),
    refreshLeaseExpiresAt: timestamp('refresh_lease_expires_at', { withTimezone: true }),
    // Write-ahead record of a refresh in progress: which token version was sent to Xero, and when.
    refreshStartedAt: timestamp('refresh_started_at', { withTimezone: true }),
    refreshStartedVersion: integer('refresh_started_version'),
    // The last refresh that failed (a token that does not decrypt, Xero unreachable), for operators:
    // no secrets. Cleared by the next refresh that succeeds. The failures back the grant off until
    // refresh_retry_at, so a row that stays broken does not take a place in every batch.
    refreshError: text('refresh_error'),
    refreshFailures: integer('refresh_failures').notNull().default(0),
    refreshRetryAt: timestamp('refresh_retry_at', { withTimezone: true }),
    // When Xero issued the stored refresh token (the consent, or the last refresh): an idle grant is
    // refreshed once it is this old plus the keep-alive cadence, well inside Xero's 60 days. The
    // default is right for the rows that existed when the column was added (the previous release
    // refreshed every active grant every ~20 minutes) and for every new consent.
    refreshTokenIssuedAt: timestamp('refresh_token_issued_at', { withTimezone: true }).notNull().defaultNow(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [check('xero_grants_status_check', sql`${t.status} in ('active', 'needs_reauth')`)],
);

export const CONNECTION_STATUSES = ['active', 'needs_reauth'] as const;

/** A tenant (Xero organisation) an organization pushes to, through the grant that connected it. */
export const xeroConnections = pgTable(
  'xero_connections',
  {
    id: id(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organizations.id, { onDelete: 'cascade' }),
    grantId: uuid('grant_id')
      .notNull()
      .references(() => xeroGrants.id, { onDelete: 'cascade' }),
    tenantId: text('tenant_id').notNull(),
    tenantName: text('tenant_name'),
    // The `id` GET /connections gives this tenant: what DELETE /connections/{id} takes. Null for
    // connections migrated from before it was stored (looked up by tenant when needed).
    xeroConnectionId: text('xero_connection_id'),
    status: text('status', { enum: CONNECTION_STATUSES }).notNull().default('active'),
    // Whether the organization, authenticated by its API key, chose this tenant's books (POST
    // /api/connections/{id}/choose or /default). A connection starts unchosen and receives no invoice.
    chosen: boolean('chosen').notNull().default(false),
    // Why the connection is not active (e.g. Xero's 403 AuthenticationUnsuccessful), for operators.
    statusReason: text('status_reason'),
    // Xero's rate-limit signals from the last answer for this tenant (docs/xero.md): the claim reads
    // them. One shared budget across replicas is a later issue; these columns are what it builds on.
    minRemaining: integer('min_remaining'),
    dayRemaining: integer('day_remaining'),
    limitsSeenAt: timestamp('limits_seen_at', { withTimezone: true }),
    // A 429 with X-Rate-Limit-Problem: day parks the tenant until Xero's Retry-After says it resets.
    parkedUntil: timestamp('parked_until', { withTimezone: true }),
    // The shared budget (docs/xero-budget.md), kept on the row the claim locks so every replica and
    // isolate counts against the same numbers: one element per call in flight (its lease expiry), and
    // one per call started in the tenant's rolling minute and day (when it was claimed).
    budgetSlots: timestamp('budget_slots', { withTimezone: true }).array().notNull().default(sql`'{}'`),
    budgetMinute: timestamp('budget_minute', { withTimezone: true }).array().notNull().default(sql`'{}'`),
    budgetDay: timestamp('budget_day', { withTimezone: true }).array().notNull().default(sql`'{}'`),
    // The bounded budget (docs/xero-budget.md): calls counted per fixed sub-window, oldest first,
    // the newest being sub-window number `*_at` (epoch ms / sub-window length). The timestamp arrays
    // above stay for the previous release (expand/contract); only budget_slots (at most 5) is shared.
    budgetMinuteCounts: integer('budget_minute_counts').array().notNull().default(sql`'{}'`),
    budgetMinuteAt: bigint('budget_minute_at', { mode: 'number' }),
    budgetDayCounts: integer('budget_day_counts').array().notNull().default(sql`'{}'`),
    budgetDayAt: bigint('budget_day_at', { mode: 'number' }),
    // When a claim last granted this tenant calls: least recently served first.
    budgetServedAt: timestamp('budget_served_at', { withTimezone: true }),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    // Kept beside the tenant-wide key below: the previous release's ON CONFLICT names this pair.
    unique('xero_connections_org_tenant_unique').on(t.organizationId, t.tenantId),
    // One tenant, one holder: two organizations can never hold one Xero tenant, even when they connect
    // it at the same instant (saveGrant's INSERT ... ON CONFLICT (tenant_id) arbitrates on it).
    unique('xero_connections_tenant_unique').on(t.tenantId),
    check('xero_connections_status_check', sql`${t.status} in ('active', 'needs_reauth')`),
    index('xero_connections_grant_idx').on(t.grantId),
  ],
);

/**
 * App-wide Xero signals (one row, id 'app'): X-AppMinLimit-Remaining from the last answer, and the pause
 * a 429 `appminute` sets for every tenant. Kept in the database so every replica's next claim sees it.
 */
export const xeroAppLimits = pgTable('xero_app_limits', {
  id: text('id').primaryKey(),
  appMinRemaining: integer('app_min_remaining'),
  pausedUntil: timestamp('paused_until', { withTimezone: true }),
  // The app's rolling minute across every tenant (docs/xero-budget.md): one element per call claimed.
  budgetMinute: timestamp('budget_minute', { withTimezone: true }).array().notNull().default(sql`'{}'`),
  // The same minute in fixed sub-windows, as on xero_connections.
  budgetMinuteCounts: integer('budget_minute_counts').array().notNull().default(sql`'{}'`),
  budgetMinuteAt: bigint('budget_minute_at', { mode: 'number' }),
  updatedAt: updatedAt(),
});

// `cancelled`: stopped through POST /api/invoices/{id}/cancel before anything reached Xero; never claimed.
export const PUSH_STATUSES = [
  'queued',
  'pushed',
  'failed',
  'dead',
  'awaiting_connection',
  'cancelled',
] as const;
export type PushStatus = (typeof PUSH_STATUSES)[number];

// Stored with fillfactor 50 (migration 0020, which Drizzle's schema cannot express): the claim's lease
// write then stays on the row's page as a HOT update, without a new entry in every index below.
export const invoicePushes = pgTable(
  'invoice_pushes',
  {
    id: id(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organizations.id, { onDelete: 'cascade' }),
    connectionId: uuid('connection_id').references(() => xeroConnections.id, { onDelete: 'set null' }),
    // The Xero tenant the push was routed to (its `tenantId`, or the default connection's tenant), kept
    // when that connection is deleted: a reconnect of this tenant takes the push back, and no other
    // tenant ever does. Null: never routed (it waits for the organization's default).
    tenantId: text('tenant_id'),
    idempotencyKey: text('idempotency_key').notNull(),
    // sha256 of the canonical request body: the same key with another body is a conflict.
    requestHash: text('request_hash').notNull(),
    payload: jsonb('payload').notNull(),
    // UTF-8 bytes of the invoice as received, for ORG_MAX_PENDING_BYTES; null in rows written before it.
    payloadBytes: integer('payload_bytes'),
    status: text('status', { enum: PUSH_STATUSES }).notNull(),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: timestamp('next_attempt_at', { withTimezone: true }).notNull().defaultNow(),
    leaseOwner: text('lease_owner'),
    leaseExpiresAt: timestamp('lease_expires_at', { withTimezone: true }),
    lastError: text('last_error'),
    xeroInvoiceId: text('xero_invoice_id'),
    // Xero keeps an Idempotency-Key for 6 minutes only (docs/ticks.md): the key in use is the push id
    // (generation 0) or `<push id>:<generation>`, and when it was first sent.
    xeroKeyGeneration: integer('xero_key_generation').notNull().default(0),
    xeroKeySentAt: timestamp('xero_key_sent_at', { withTimezone: true }),
    // An attempt under the current key may have created the invoice (timeout, lost answer, 5xx).
    xeroInDoubt: boolean('xero_in_doubt').notNull().default(false),
    // The invoice's `Url` as first sent, searchable with GET Invoices `where` (docs/xero.md).
    xeroMarker: text('xero_marker'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    unique('invoice_pushes_org_key_unique').on(t.organizationId, t.idempotencyKey),
    check('invoice_pushes_key_length_check', sql`char_length(${t.idempotencyKey}) between 1 and 128`),
    check(
      'invoice_pushes_status_check',
      sql`${t.status} in ('queued', 'pushed', 'failed', 'dead', 'awaiting_connection', 'cancelled')`,
    ),
    // The claim reads due pushes in next_attempt_at order: a partial index serves it without a sort.
    index('invoice_pushes_due_idx').on(t.nextAttemptAt).where(sql`${t.status} in ('queued', 'failed')`),
    // The budgeted claim takes each tenant's oldest due pushes, up to that tenant's room.
    index('invoice_pushes_connection_due_idx')
      .on(t.connectionId, t.nextAttemptAt)
      .where(sql`${t.status} in ('queued', 'failed')`),
    index('invoice_pushes_org_created_idx').on(t.organizationId, t.createdAt, t.id),
    // A list filtered by status (?status=dead) reads that status's newest rows, not the whole history.
    index('invoice_pushes_org_status_created_idx').on(t.organizationId, t.status, t.createdAt, t.id),
    // The reference a disconnect follows (its ON DELETE SET NULL, and the waiting pushes it moves):
    // only open pushes keep one, as a settled push lets go of its connection.
    index('invoice_pushes_connection_idx').on(t.connectionId).where(sql`${t.connectionId} is not null`),
    // The pending-invoice quota counts an organization's unfinished pushes (invoices/quota.ts).
    index('invoice_pushes_org_pending_idx')
      .on(t.organizationId)
      .where(sql`${t.status} in ('queued', 'failed', 'awaiting_connection')`),
    // The retention tick finds settled history by age without reading what is still open. On created_at,
    // which no claim changes: an index on updated_at would make every claim's lease update non-HOT.
    index('invoice_pushes_settled_idx').on(t.createdAt).where(sql`${t.status} in ('pushed', 'dead')`),
  ],
);

/**
 * The Idempotency-Keys POST /api/invoices/{id}/retry was called with: a replay answers with the push as it
 * is now and requeues nothing. Written in the same statement as the requeue it records, so a key is kept
 * only for a retry that happened; deleted with its push.
 */
export const invoicePushRetries = pgTable(
  'invoice_push_retries',
  {
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organizations.id, { onDelete: 'cascade' }),
    idempotencyKey: text('idempotency_key').notNull(),
    pushId: uuid('push_id')
      .notNull()
      .references(() => invoicePushes.id, { onDelete: 'cascade' }),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.idempotencyKey] }),
    index('invoice_push_retries_push_idx').on(t.pushId),
  ],
);

// OAuth `state` for the Xero connect flow: only its hash is stored, it is consumed by one DELETE
// (single use) and it expires. `browserHash` is the hash of the cookie that binds the flow to the
// browser that opened the connect link; `codeVerifierEnc` the sealed PKCE verifier. Both are null
// only on rows a release before connect links wrote, which the callback refuses.
export const oauthStates = pgTable('oauth_states', {
  stateHash: text('state_hash').primaryKey(),
  organizationId: uuid('organization_id')
    .notNull()
    .references(() => organizations.id, { onDelete: 'cascade' }),
  expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  createdAt: createdAt(),
  browserHash: text('browser_hash'),
  codeVerifierEnc: text('code_verifier_enc'),
});

// One-time connect links minted through the API (POST /api/connect-links): only the token's hash is
// stored; opening the link consumes it (one DELETE) and starts one OAuth flow.
export const connectLinks = pgTable(
  'connect_links',
  {
    linkHash: text('link_hash').primaryKey(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organizations.id, { onDelete: 'cascade' }),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
    createdAt: createdAt(),
  },
  (t) => [index('connect_links_org_idx').on(t.organizationId, t.expiresAt)],
);

/**
 * An organization's webhook receivers (docs/api.md, "Webhooks"). The signing secret is sealed with the
 * token key (as Xero tokens are) and shown once; during a rotation the previous one signs too, until
 * `previous_secret_expires_at`. A disabled endpoint gets no new deliveries; `disabled_reason` says why.
 */
export const webhookEndpoints = pgTable(
  'webhook_endpoints',
  {
    id: id(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organizations.id, { onDelete: 'cascade' }),
    url: text('url').notNull(),
    secretEnc: text('secret_enc').notNull(),
    previousSecretEnc: text('previous_secret_enc'),
    previousSecretExpiresAt: timestamp('previous_secret_expires_at', { withTimezone: true }),
    disabledAt: timestamp('disabled_at', { withTimezone: true }),
    disabledReason: text('disabled_reason'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index('webhook_endpoints_org_idx').on(t.organizationId)],
);

/**
 * The outbox: one row per event, written by the same statement as the change that causes it, so a change
 * that rolled back has none. Its deliveries (one per endpoint active then) are written by that statement too.
 */
export const webhookEvents = pgTable(
  'webhook_events',
  {
    id: id(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organizations.id, { onDelete: 'cascade' }),
    type: text('type').notNull(),
    data: jsonb('data').notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    index('webhook_events_org_created_idx').on(t.organizationId, t.createdAt),
    // Retention finds old events across organizations.
    index('webhook_events_created_idx').on(t.createdAt),
  ],
);

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed', 'dead'] as const;

/** One event to one endpoint: the delivery queue, claimed with a lease as invoice pushes are. */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: id(),
    eventId: uuid('event_id')
      .notNull()
      .references(() => webhookEvents.id, { onDelete: 'cascade' }),
    endpointId: uuid('endpoint_id')
      .notNull()
      .references(() => webhookEndpoints.id, { onDelete: 'cascade' }),
    status: text('status', { enum: DELIVERY_STATUSES }).notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: timestamp('next_attempt_at', { withTimezone: true }).notNull().defaultNow(),
    leaseOwner: text('lease_owner'),
    leaseExpiresAt: timestamp('lease_expires_at', { withTimezone: true }),
    lastStatus: integer('last_status'),
    lastError: text('last_error'),
    deliveredAt: timestamp('delivered_at', { withTimezone: true }),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    check('webhook_deliveries_status_check', sql`${t.status} in ('pending', 'delivered', 'failed', 'dead')`),
    index('webhook_deliveries_due_idx').on(t.nextAttemptAt).where(sql`${t.status} in ('pending', 'failed')`),
    index('webhook_deliveries_endpoint_idx').on(t.endpointId, t.createdAt),
    // The delivery log's keyset pages: newest first, (created_at, id) after the cursor.
    index('webhook_deliveries_endpoint_log_idx').on(t.endpointId, t.createdAt, t.id),
    index('webhook_deliveries_event_idx').on(t.eventId),
    // The claim's per-endpoint look: its due deliveries in order, and its live leases counted. On
    // columns the claim's lease update leaves alone, so that update stays HOT.
    index('webhook_deliveries_endpoint_due_idx')
      .on(t.endpointId, t.nextAttemptAt)
      .where(sql`${t.status} in ('pending', 'failed')`),
    // Retention: settled deliveries by creation (never updated after insert, unlike updated_at).
    index('webhook_deliveries_settled_idx').on(t.createdAt).where(sql`${t.status} in ('delivered', 'dead')`),
  ],
);

/**
 * Columns still in the schema that this release neither reads nor writes, as `table.column`: the
 * release before a contract lists here what the contract will drop, so that the database's record of
 * running releases shows it no longer needs them (docs/deploying.md, "Retiring a column").
 */
export const retiredColumns: readonly string[] = [];
