import { randomBytes } from 'node:crypto';
import { createSecretBox } from '@honest-health/platform/crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { chooseConnection } from '../src/app/connections/choose.js';
import { saveGrant } from '../src/app/connections/grants.js';
import { createOrganization } from '../src/app/organizations.js';
import { authEventIdOf } from '../src/app/xero/client.js';
import { migratedDatabase } from './support/databases.js';
import { invoiceBody, waitForKey } from './support/orgs.js';
import { type OtlpSink, startOtlpSink } from './support/otlp-sink.js';
import { freePort } from './support/ports.js';
import type { Cluster } from './support/postgres.js';
import { literal, type SecretPattern, SUITE_SECRETS, scanForSecrets } from './support/secret-scan.js';
import { type SentrySink, startSentrySink } from './support/sentry-sink.js';
import { type ServerProcess, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import { captureLog, openDatabase, type Sandbox } from './support/ticks.js';
import { until } from './support/until.js';

// No secret reaches a log line, an error report, a span or /metrics. A server runs with every secret
// set and goes through the flows that handle them (API keys, Xero tokens and their refresh, a read-only
// failover, an unhandled error, a failed boot, a bad configuration); everything it wrote and sent is
// then searched for the secrets' values. (global-setup.ts does the same for every server of the run.)

const random = (label: string) => `${label}-${randomBytes(12).toString('hex')}`;

let cluster: Cluster;
let sandbox: Sandbox;
let sentry: SentrySink;
let otlp: OtlpSink;
const xeroSecret = random('xero-secret');
beforeAll(async () => {
  [cluster, sandbox, sentry, otlp] = await Promise.all([
    sharedCluster(),
    startXeroSandbox({ port: 0, clientId: 'leak-check-client', clientSecret: xeroSecret }),
    startSentrySink(),
    startOtlpSink(),
  ]);
});
afterAll(async () => {
  await otlp?.close();
  await sentry?.close();
  await sandbox?.close();
  await cluster?.remove();
});

const everything = (server: ServerProcess) =>
  [...server.logs.map((l) => JSON.stringify(l)), ...server.output].join('\n');

describe('secrets', () => {
  it('never appear in logs, error reports, spans or metrics, through success and failure', async () => {
    const plainUrl = await migratedDatabase(cluster);
    const dbName = new URL(plainUrl).pathname.slice(1);
    // Trust authentication ignores the password, but the server still holds it in its URL.
    const dbPassword = random('db-password');
    const url = new URL(plainUrl);
    url.password = dbPassword;
    const tokenKey = randomBytes(32).toString('base64');
    const metricsToken = random('metrics-token');
    const otelToken = random('otel-token');

    // An organization connected to Xero, seeded the way the connect flow leaves it.
    const { log } = captureLog();
    const handle = await openDatabase(plainUrl, log);
    const box = await createSecretBox(tokenKey);
    const org = await createOrganization(handle.db, 'Secretive Ltd');
    const tenant = sandbox.state.createTenant({ name: 'Secretive Ltd', accountCodes: null });
    const { tokens } = sandbox.state.createGrant({ tenantIds: [tenant.id] }) as unknown as {
      tokens: { access_token: string; refresh_token: string; expires_in: number };
    };
    const saved = await saveGrant(handle.db, box, {
      organizationId: org.id,
      authEventId: authEventIdOf(tokens.access_token),
      scope: null,
      tenants: [{ tenantId: tenant.id, tenantName: 'Secretive Ltd', connectionId: null, authEventId: null }],
      tokens: {
        accessToken: tokens.access_token,
        refreshToken: tokens.refresh_token,
        expiresAt: new Date(Date.now() + tokens.expires_in * 1000),
      },
    });
    // The organization chose it (a new connection receives nothing until then).
    await chooseConnection(handle.db, org.id, saved.connected[0]?.id as string, true);

    const env = {
      DATABASE_URL: url.toString(),
      TOKEN_ENCRYPTION_KEY: tokenKey,
      METRICS_TOKEN: metricsToken,
      SENTRY_DSN: sentry.dsn,
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint,
      OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer ${otelToken}`,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      XERO_API_URL: sandbox.url,
      XERO_IDENTITY_URL: `${sandbox.url}/identity`,
      XERO_CLIENT_ID: 'leak-check-client',
      XERO_CLIENT_SECRET: xeroSecret,
      TICK_INTERVAL_MS: '300',
      API_KEY_REFRESH_MS: '200',
      LOG_LEVEL: 'debug',
    };
    const server = await spawnServer({ env });
    const direct = new pg.Client(plainUrl);
    const wrongKey = `hh_live_${randomBytes(32).toString('base64url')}`;
    try {
      await server.waitForReady();
      await waitForKey(server, org.apiKey);
      await direct.connect();
      const auth = { authorization: `Bearer ${org.apiKey}` };

      // Ingress, a push to Xero, a wrong key, metrics with the right and a wrong token.
      const submitted = await server.get('/api/invoices', {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': 'secret-1' },
        body: JSON.stringify(invoiceBody()),
      });
      expect(submitted.status).toBe(202);
      await until(
        async () => (await direct.query(`SELECT status FROM invoice_pushes`)).rows[0]?.status,
        (s) => s === 'pushed',
      );
      expect(
        (await server.get('/api/invoices', { headers: { authorization: `Bearer ${wrongKey}` } })).status,
      ).toBe(401);
      const metrics = await server.get('/metrics', { headers: { authorization: `Bearer ${metricsToken}` } });
      expect(metrics.status).toBe(200);
      const exposition = await metrics.text();
      expect(
        (await server.get('/metrics', { headers: { authorization: `Bearer ${random('guess')}` } })).status,
      ).toBe(401);

      // A token refresh: the old refresh token goes to Xero, new tokens come back.
      await direct.query(
        `UPDATE xero_grants SET access_expires_at = now() + interval '5 minutes', refresh_token_issued_at = now() - interval '8 days'`,
      );
      await until(
        async () => (await direct.query('SELECT token_version FROM xero_grants')).rows[0]?.token_version,
        (v) => v === 2,
      );

      // A failover's shape: read-only sessions, poisoned pools, driver errors in the logs.
      await cluster.query(`ALTER DATABASE ${dbName} SET default_transaction_read_only = on`);
      await cluster.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE 'honest-health:%'`,
        [dbName],
      );
      await until(
        async () =>
          ((await (await server.get('/readyz')).json()) as { checks: { database: string } }).checks.database,
        (d) => d === 'read_only',
      );
      await cluster.query(`ALTER DATABASE ${dbName} RESET default_transaction_read_only`);
      await until(
        async () => (await server.get('/readyz')).status,
        (s) => s === 200,
      );

      // An unhandled error, reported to error tracking.
      await direct.query('ALTER TABLE xero_connections RENAME TO xero_connections_away');
      expect((await server.get('/api/connections', { headers: auth })).status).toBe(500);
      await sentry.waitForEvent();
      await direct.query('ALTER TABLE xero_connections_away RENAME TO xero_connections');
      await until(
        async () => otlp.spans.length,
        (n) => n > 0,
      );

      await server.stop();
      const secrets: SecretPattern[] = [
        ...SUITE_SECRETS,
        literal('the database password', dbPassword),
        literal('TOKEN_ENCRYPTION_KEY', tokenKey),
        literal('METRICS_TOKEN', metricsToken),
        literal('the OTLP exporter header', otelToken),
        literal('XERO_CLIENT_SECRET', xeroSecret),
        literal('the API key', org.apiKey),
        literal('a wrong API key', wrongKey),
        literal('the Xero access token', tokens.access_token),
        literal('the Xero refresh token', tokens.refresh_token),
      ];
      const written = {
        logs: everything(server),
        errorReports: JSON.stringify(sentry.items),
        spans: otlp.bodies.join('\n'),
        metrics: exposition,
      };
      expect(server.logs.some((l) => l.msg === 'database pool disposed')).toBe(true);
      expect(server.logs.some((l) => l.msg === 'unhandled request error')).toBe(true);
      for (const [where, text] of Object.entries(written)) {
        expect(scanForSecrets(text, secrets), `secrets in ${where}`).toEqual([]);
      }
    } finally {
      await direct.end().catch(() => {});
      await server.stop();
      await handle.close();
    }
  });

  it('never appear when boot fails or the configuration is rejected', async () => {
    const dbPassword = random('db-password');
    const deadPort = await freePort();
    const failedBoot = await spawnServer({
      env: {
        DATABASE_URL: `postgres://app:${dbPassword}@127.0.0.1:${deadPort}/app`,
        PROBE_TIMEOUT_MS: '500',
      },
    });
    expect(await failedBoot.exited).toBe(1);
    const badConfig = await spawnServer({
      env: { DATABASE_URL: `postgres://app:${dbPassword}@db.internal:notaport/app`, METRICS_TOKEN: 'x' },
    });
    expect(await badConfig.exited).toBe(1);
    expect(
      badConfig.logs.some((l) => l.level === 'error' && JSON.stringify(l).includes('DATABASE_URL')),
    ).toBe(true);
    const secrets = [...SUITE_SECRETS, literal('the database password', dbPassword)];
    expect(scanForSecrets(everything(failedBoot), secrets)).toEqual([]);
    expect(scanForSecrets(everything(badConfig), secrets)).toEqual([]);
  });
});
