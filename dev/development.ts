// Development mode (README, "Two commands"): with the embedded database and nothing configured (no
// DATABASE_URL, no TOKEN_ENCRYPTION_KEY, no XERO_* variable), `npm start` runs dev/start.ts, which
// serves the Xero sandbox (dev/xero-sandbox) on a loopback port and runs the product's process module
// with this wrapping: Xero's URLs point at the sandbox, and a development organization is connected to
// one of its tenants, so an invoice submitted with the printed key ends `pushed`. The browser's
// authorize URL is the sandbox's own address, so a connect link of any other organization opens the
// sandbox's consent page (docs/development.md). Nothing in src/ imports this folder: the sandbox is in
// no build of the product (test/fast/boundaries.test.ts).

import type { AppRegistry, Database, Logger, ProcessAppModule } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import type { AuthEnv } from '../src/app/auth.js';
import type { AppConfig } from '../src/app/config.js';
import { chooseConnection } from '../src/app/connections/choose.js';
import { saveGrant } from '../src/app/connections/grants.js';
import { buildHonestHealth } from '../src/app/module.js';
import { createOrganization, organizationsNamed } from '../src/app/organizations.js';
import { honestHealthProcess, processWebhookNet } from '../src/app/process-module.js';
import { authEventIdOf } from '../src/app/xero/client.js';
import type { RunningXeroSandbox } from './xero-sandbox/server.js';

export const DEVELOPMENT_ORGANIZATION = 'Development (Xero sandbox)';
/** One fixed tenant id, so each boot's fresh sandbox reconnects the same connection row. */
export const DEVELOPMENT_TENANT_ID = 'd0000000-0000-4000-8000-000000000001';
export const DEVELOPMENT_CLIENT_ID = 'honest-health-development';

/** The sandbox's options in development mode: its one tenant, a person's consent page for the rest. */
export function developmentSandboxOptions(clientSecret: string) {
  return {
    clientId: DEVELOPMENT_CLIENT_ID,
    clientSecret,
    providerName: 'honest-health (development)',
    tenants: [
      { id: DEVELOPMENT_TENANT_ID, name: 'Development books', accountCodes: null, connectOnAuthorize: false },
    ],
    consentPage: true,
  };
}

/**
 * The product's process module against a running sandbox (started with developmentSandboxOptions):
 * the same app, reaching the sandbox over HTTP as it would reach Xero.
 */
export function withDevelopmentSandbox(sandbox: RunningXeroSandbox): ProcessAppModule<AppConfig, AuthEnv> {
  return {
    ...honestHealthProcess,
    loadConfig: (env) => {
      const config = honestHealthProcess.loadConfig(env);
      // The callback on this server's own port, so the browser comes back to it (XERO_REDIRECT_URI,
      // like any XERO_* variable, would have turned development mode off).
      const port = env.PORT && env.PORT !== '' ? env.PORT : '8080';
      return {
        ...config,
        xero: {
          ...config.xero,
          apiUrl: sandbox.urls.url,
          identityUrl: sandbox.urls.identityBaseUrl,
          authorizeUrl: sandbox.urls.authorizeUrl,
          redirectUri: `http://localhost:${port}/connect/xero/callback`,
          clientId: sandbox.state.client.clientId,
          clientSecret: sandbox.state.client.clientSecret,
        },
      };
    },
    async create(config, context) {
      const { app, box } = await buildHonestHealth(config, context, fetch, {
        announceDevelopmentKey: false,
        webhookNet: processWebhookNet,
      });
      let connected = false;
      // Before the API-key registry, so the development key works from the first request.
      const setup: AppRegistry = {
        name: 'development organization',
        load: async (db) => {
          if (connected) return;
          await connectDevelopment(db, box, sandbox, context.log);
          connected = true;
        },
      };
      return { ...app, registries: [setup, ...app.registries] };
    },
  };
}

async function connectDevelopment(db: Database, box: SecretBox, sandbox: RunningXeroSandbox, log: Logger) {
  const [existing] = await organizationsNamed(db, DEVELOPMENT_ORGANIZATION);
  const created = existing ? undefined : await createOrganization(db, DEVELOPMENT_ORGANIZATION);
  const organizationId = existing?.id ?? (created?.id as string);
  // The sandbox lives in memory: every boot grants anew, and saveGrant moves the tenant's connection
  // row (its choice and default kept) to the new grant.
  const { grant, tokens } = sandbox.state.createGrant({ tenantIds: [DEVELOPMENT_TENANT_ID] });
  const t = tokens as { access_token: string; refresh_token: string; expires_in: number; scope: string };
  const saved = await saveGrant(db, box, {
    organizationId,
    authEventId: authEventIdOf(t.access_token),
    scope: t.scope,
    tokens: {
      accessToken: t.access_token,
      refreshToken: t.refresh_token,
      expiresAt: new Date(Date.now() + t.expires_in * 1000),
    },
    tenants: [
      {
        tenantId: DEVELOPMENT_TENANT_ID,
        tenantName: 'Development books',
        connectionId: grant.connections.get(DEVELOPMENT_TENANT_ID)?.id ?? null,
        authEventId: grant.authEventId,
      },
    ],
  });
  const connection = saved.connected[0];
  if (!connection) throw new Error('the development sandbox tenant is held by another organization');
  // Chosen and the default: a new connection receives nothing until chosen.
  await chooseConnection(db, organizationId, connection.id, true);
  const key = created
    ? `its API key, shown this once: ${created.apiKey}`
    : 'its API key was shown when it was created (npm run org:key:create -- --org <id> makes another, with the server stopped)';
  log.warn(
    `development mode: no DATABASE_URL, TOKEN_ENCRYPTION_KEY or XERO_* set, so the bundled Xero sandbox runs in this process (nothing reaches Xero), tokens are sealed with a development key in .data/, and organization "${DEVELOPMENT_ORGANIZATION}" pushes to its tenant; ${key}`,
    { organizationId, tenantId: DEVELOPMENT_TENANT_ID, xeroSandbox: sandbox.url },
  );
}
