// The newcomer's first run (README, "First run"): with the embedded database and nothing configured
// (no DATABASE_URL, no TOKEN_ENCRYPTION_KEY, no XERO_* variable), `npm start` runs the bundled Xero
// sandbox (tools/xero-sandbox) in this process and connects a development organization to one of its
// tenants, so an invoice submitted with the printed key ends `pushed`. Node and Bun only: the runtime
// entries for those import this module; src/runtime/worker.ts imports src/app/module.ts, so tools/
// never enters the Workers bundle.

import type { AppIndex, Database, Env, Logger, ProcessAppModule } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import { createXeroSandbox, type XeroSandbox } from '../../../tools/xero-sandbox/app.js';
import { IN_PROCESS_ORIGIN, inProcessFetch } from '../../../tools/xero-sandbox/in-process.js';
import type { AuthEnv } from '../auth.js';
import type { AppConfig } from '../config.js';
import { chooseConnection } from '../connections/choose.js';
import { saveGrant } from '../connections/grants.js';
import { buildHonestHealth, honestHealth } from '../module.js';
import { createOrganization, organizationsNamed } from '../organizations.js';
import { honestHealthProcess } from '../process-module.js';
import { authEventIdOf } from '../xero/client.js';

export const DEVELOPMENT_ORGANIZATION = 'Development (Xero sandbox)';
/** One fixed tenant id, so each boot's fresh sandbox reconnects the same connection row. */
export const DEVELOPMENT_TENANT_ID = 'd0000000-0000-4000-8000-000000000001';

export type DevelopmentConfig = AppConfig & { developmentSandbox: boolean };

/** Only the embedded database with nothing set: any DATABASE_URL, token key or XERO_* turns it off. */
export function wantsDevelopmentSandbox(env: Env): boolean {
  const set = (name: string) => env[name] !== undefined && env[name] !== '';
  return (
    !set('DATABASE_URL') &&
    !set('TOKEN_ENCRYPTION_KEY') &&
    !Object.keys(env).some((k) => k.startsWith('XERO_') && set(k))
  );
}

export const honestHealthWithDevelopmentSandbox: ProcessAppModule<DevelopmentConfig, AuthEnv> = {
  ...honestHealthProcess,
  loadConfig: (env) => ({
    ...honestHealth.loadConfig(env),
    developmentSandbox: wantsDevelopmentSandbox(env),
  }),
  async create(config, context) {
    if (!config.developmentSandbox || context.lifecycle !== 'process' || !context.embedded) {
      return honestHealth.create(config, context);
    }
    const clientSecret = crypto.randomUUID();
    const sandbox = createXeroSandbox({
      clientId: 'honest-health-development',
      clientSecret,
      providerName: 'honest-health (development)',
      tenants: [{ id: DEVELOPMENT_TENANT_ID, name: 'Development books', accountCodes: null }],
    });
    const xero = {
      ...config.xero,
      apiUrl: IN_PROCESS_ORIGIN,
      identityUrl: `${IN_PROCESS_ORIGIN}/identity`,
      authorizeUrl: `${IN_PROCESS_ORIGIN}/identity/connect/authorize`,
      clientId: 'honest-health-development',
      clientSecret,
    };
    const { app, box } = await buildHonestHealth(
      { ...config, xero },
      context,
      inProcessFetch(sandbox.app) as typeof fetch,
      { announceDevelopmentKey: false },
    );
    let connected = false;
    // Before the API-key index, so the development key works from the first request.
    const setup: AppIndex = {
      name: 'development organization',
      load: async (db) => {
        if (connected) return;
        await connectDevelopment(db, box, sandbox, context.log);
        connected = true;
      },
    };
    return { ...app, indexes: [setup, ...app.indexes] };
  },
};

async function connectDevelopment(db: Database, box: SecretBox, sandbox: XeroSandbox, log: Logger) {
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
    { organizationId, tenantId: DEVELOPMENT_TENANT_ID },
  );
}
