import type { Database } from '@honest-health/platform';
import { createLogger, type Logger, loadConfig } from '@honest-health/platform';
import { createSecretBox, type SecretBox } from '@honest-health/platform/crypto';
import { DatabaseHandle, migrate } from '@honest-health/platform/db';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import type { startXeroSandbox } from '../../dev/xero-sandbox/server.js';
import { chooseConnection } from '../../src/app/connections/choose.js';
import { saveGrant } from '../../src/app/connections/grants.js';
import type { RefreshTickDeps } from '../../src/app/connections/refresh-tokens.js';
import { openDriver } from '../../src/app/databases.js';
import { migrations } from '../../src/app/migrations.gen.js';
import { createOrganization } from '../../src/app/organizations.js';
import { XERO_BUDGET } from '../../src/app/push/budget.js';
import type { PushTickDeps } from '../../src/app/push/tick.js';
import { authEventIdOf, createXeroClient, type XeroClient } from '../../src/app/xero/client.js';
import { TEST_TOKEN_KEY } from './server.js';

export type Sandbox = Awaited<ReturnType<typeof startXeroSandbox>>;

export interface LogCapture {
  log: Logger;
  lines: Record<string, unknown>[];
}

export function captureLog(): LogCapture {
  const lines: Record<string, unknown>[] = [];
  return { log: createLogger('debug', {}, (line) => lines.push(JSON.parse(line))), lines };
}

/** A migrated database behind a real DatabaseHandle, as the server holds it. */
export async function openDatabase(url: string, log: Logger): Promise<DatabaseHandle> {
  const driver = openDriver(loadConfig({ DATABASE_URL: url }), log);
  await driver.ready();
  const handle = new DatabaseHandle(driver, 'app', log);
  await migrate(handle.pool, migrations, log);
  return handle;
}

export const testBox = (): Promise<SecretBox> => createSecretBox(TEST_TOKEN_KEY);

/** The variables that point a spawned server or a Worker at the sandbox, as its Xero app. */
export function sandboxEnv(sandbox: Sandbox) {
  return {
    XERO_API_URL: sandbox.url,
    XERO_IDENTITY_URL: `${sandbox.url}/identity`,
    XERO_AUTHORIZE_URL: `${sandbox.url}/identity/connect/authorize`,
    XERO_CLIENT_ID: 'sandbox-client',
    XERO_CLIENT_SECRET: 'sandbox-secret',
  };
}

export function xeroConfigFor(sandbox: Sandbox) {
  return {
    apiUrl: sandbox.url,
    identityUrl: `${sandbox.url}/identity`,
    authorizeUrl: `${sandbox.url}/identity/connect/authorize`,
    redirectUri: 'http://127.0.0.1:1/connect/xero/callback',
    scopes: 'offline_access accounting.invoices',
    clientId: 'sandbox-client',
    clientSecret: 'sandbox-secret',
    timeoutMs: 2000,
  };
}

/** An organization connected to a fresh sandbox tenant through a real grant; returns its ids. */
export async function connectedOrganization(
  db: Database,
  box: SecretBox,
  sandbox: Sandbox,
  name: string,
  options: ConnectedOptions = { accountCodes: null },
) {
  const { org, tenantIds, connectionIds, grantId, authEventId } = await connectedGrant(
    db,
    box,
    sandbox,
    name,
    1,
    options,
  );
  return {
    org,
    tenantId: tenantIds[0] as string,
    connectionId: connectionIds[0] as string,
    grantId,
    authEventId,
  };
}

export interface ConnectedOptions {
  accountCodes?: null | undefined;
  /**
   * What the organization chose: by default every tenant is chosen and the first is its
   * default, as the migration leaves existing customers; 'none' leaves them unchosen, as a connect does.
   */
  chosen?: 'default' | 'none';
}

/**
 * An organization connected to `tenants` fresh sandbox tenants through one grant (one consent), its
 * first tenant chosen as the default unless `options.chosen` is 'none'.
 */
export async function connectedGrant(
  db: Database,
  box: SecretBox,
  sandbox: Sandbox,
  name: string,
  tenants: number,
  options: ConnectedOptions = { accountCodes: null },
) {
  const org = await createOrganization(db, name);
  const created = Array.from({ length: tenants }, (_, i) =>
    sandbox.state.createTenant({
      name: tenants === 1 ? name : `${name} ${i + 1}`,
      accountCodes: options.accountCodes,
    }),
  );
  const { grant, tokens } = sandbox.state.createGrant({ tenantIds: created.map((t) => t.id) }) as unknown as {
    grant: { authEventId: string; connections: Map<string, { id: string }> };
    tokens: { access_token: string; refresh_token: string; expires_in: number; scope: string };
  };
  const saved = await saveGrant(db, box, {
    organizationId: org.id,
    authEventId: authEventIdOf(tokens.access_token),
    scope: tokens.scope,
    tokens: {
      accessToken: tokens.access_token,
      refreshToken: tokens.refresh_token,
      expiresAt: new Date(Date.now() + tokens.expires_in * 1000),
    },
    tenants: created.map((t) => ({
      tenantId: t.id,
      tenantName: t.name,
      connectionId: grant.connections.get(t.id)?.id ?? null,
      authEventId: grant.authEventId,
    })),
  });
  if (!saved.grantId) throw new Error('no grant saved');
  if (options.chosen !== 'none') {
    for (const [i, c] of saved.connected.entries()) await chooseConnection(db, org.id, c.id, i === 0);
  }
  return {
    org,
    tenantIds: created.map((t) => t.id),
    connectionIds: saved.connected.map((c) => c.id),
    grantId: saved.grantId,
    authEventId: grant.authEventId,
  };
}

export async function queuePush(db: Database, organizationId: string, key: string, payload?: unknown) {
  const body = payload ?? {
    contact: { name: 'Customer' },
    lineItems: [{ description: 'Widget', quantity: '1', unitAmount: '10.00' }],
    date: '2026-11-29',
    currency: 'NZD',
  };
  const rows = await db.execute<{ id: string }>(sql`
    INSERT INTO invoice_pushes (organization_id, connection_id, idempotency_key, request_hash, payload, status)
    SELECT ${organizationId}, c.id, ${key}, 'test', ${JSON.stringify(body)}::jsonb,
           CASE WHEN c.id IS NULL THEN 'awaiting_connection' ELSE 'queued' END
    FROM (SELECT 1) one
    LEFT JOIN xero_connections c ON c.organization_id = ${organizationId} AND c.status = 'active'
    RETURNING id`);
  const id = (rows as unknown as { rows: { id: string }[] }).rows[0]?.id;
  if (!id) throw new Error('no push inserted');
  return id;
}

/** `n` queued pushes for one connection, keyed `${prefix}-1` to `${prefix}-n`, in one statement. */
export async function queueBacklog(
  db: Database,
  organizationId: string,
  connectionId: string,
  n: number,
  prefix: string,
) {
  await db.execute(sql`
    INSERT INTO invoice_pushes (organization_id, connection_id, idempotency_key, request_hash, payload, status)
    SELECT ${organizationId}, ${connectionId}, ${prefix} || '-' || n, 'test',
           jsonb_build_object('contact', jsonb_build_object('name', 'Customer ' || n),
                              'lineItems', jsonb_build_array(jsonb_build_object('description', 'Item', 'quantity', '1', 'unitAmount', '1.00')),
                              'date', '2026-11-29', 'currency', 'NZD'),
           'queued'
    FROM generate_series(1, ${n}) AS n`);
}

export async function pushRow(url: string, id: string) {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return (await client.query('SELECT * FROM invoice_pushes WHERE id = $1', [id])).rows[0];
  } finally {
    await client.end();
  }
}

export function plainDb(url: string) {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  return { db: drizzle({ client: pool }), end: () => pool.end() };
}

/** The push tick as the tests run it: the sandbox's Xero, Xero's real budget, one replica. */
export function pushTickDeps(
  sandbox: Sandbox,
  box: SecretBox,
  log: Logger,
  overrides: Partial<PushTickDeps> = {},
): PushTickDeps {
  return {
    xero: createXeroClient(xeroConfigFor(sandbox)),
    box,
    budget: XERO_BUDGET,
    owner: 'replica-a',
    maxAttempts: 12,
    batchSize: 50,
    leaseMs: 60_000,
    backoff: { baseMs: 30_000, maxMs: 3_600_000 },
    log,
    ...overrides,
  };
}

/** The refresh tick as the tests run it: the sandbox's Xero, one replica, Xero's last 10 minutes. */
export function refreshTickDeps(
  sandbox: Sandbox,
  box: SecretBox,
  log: Logger,
  overrides: Partial<RefreshTickDeps> = {},
): RefreshTickDeps {
  return {
    xero: createXeroClient(xeroConfigFor(sandbox)),
    box,
    owner: 'replica-a',
    refreshWithinMs: 10 * 60_000,
    leaseMs: 60_000,
    batchSize: 50,
    log,
    ...overrides,
  };
}

/** The sandbox's client, with every Xero call it makes recorded (`PUT <key>` or `GET <marker>`). */
export function recordingClient(sandbox: Sandbox) {
  const inner = createXeroClient(xeroConfigFor(sandbox));
  const calls: string[] = [];
  const xero: XeroClient = {
    ...inner,
    putInvoice(token, tenantId, key, invoice) {
      calls.push(`PUT ${key}`);
      return inner.putInvoice(token, tenantId, key, invoice);
    },
    findInvoice(token, tenantId, marker) {
      calls.push(`GET ${marker}`);
      return inner.findInvoice(token, tenantId, marker);
    },
  };
  return { xero, calls };
}
