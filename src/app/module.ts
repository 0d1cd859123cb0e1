import type { AppContext, AppInstance, AppModule } from '@honest-health/platform';
import { ConfigError } from '@honest-health/platform';
import { createSecretBox, type SecretBox } from '@honest-health/platform/crypto';
import { ApiKeyRegistry } from './api-key-registry.js';
import type { AuthEnv } from './auth.js';
import { type AppConfig, loadAppConfig } from './config.js';
import type { RefreshTickResult } from './connections/refresh-tokens.js';
import { answerAppError } from './errors.js';
import { identity } from './identity.js';
import { observeQueueDepth } from './metrics/queue-depth.js';
import { tokenRefreshCounter } from './metrics/token-refreshes.js';
import { latestMigrationAt, schemaNeeds } from './migrations.gen.js';
import { appRoutes } from './routes.js';
import { retiredColumns } from './schema.js';
import { appTicks, TICKS } from './ticks.js';
import type { WebhookNet } from './webhooks/send.js';
import { createXeroClient } from './xero/client.js';

const DEV_TOKEN_KEY_PATH = '.data/token-encryption-key';

/**
 * honest-health as the platform runs it: invoices queued over the API and pushed to Xero by two
 * ticks, organizations authenticated by API key.
 */
export const honestHealth: AppModule<AppConfig, AuthEnv> = {
  identity,
  loadConfig: loadAppConfig,
  tickNames: Object.values(TICKS),
  latestMigrationAt,
  schemaNeeds: schemaNeeds.filter((column) => !retiredColumns.includes(column)),
  create: async (config, context) => (await buildHonestHealth(config, context)).app,
};

/**
 * Builds the app. `xeroFetch` is how it reaches Xero (tests may pass a socket-less sandbox); the
 * development wiring (dev/development.ts) takes the token box back to store the sandbox's grant.
 */
export async function buildHonestHealth(
  config: AppConfig,
  { lifecycle, log, embedded }: AppContext,
  xeroFetch: typeof fetch = fetch,
  {
    // Development mode says it in its own line, with the rest of what it set up.
    announceDevelopmentKey = true,
    webhookNet,
  }: { announceDevelopmentKey?: boolean; webhookNet?: WebhookNet } = {},
): Promise<{ app: AppInstance<AuthEnv>; box: SecretBox }> {
  for (const d of config.deprecatedVariables)
    log.warn('a variable is set under its old name; rename it', { ...d });
  let tokenKey = config.tokenEncryptionKey;
  if (tokenKey === undefined) {
    // Configuration allows this only with the embedded database, which Workers never use.
    if (lifecycle === 'isolate' || !embedded) {
      throw new ConfigError([
        `TOKEN_ENCRYPTION_KEY is required ${lifecycle === 'isolate' ? 'on Workers' : 'when DATABASE_URL is set'}`,
      ]);
    }
    const { developmentKey } = await import('./dev-key.js');
    const dev = developmentKey(DEV_TOKEN_KEY_PATH);
    tokenKey = dev.key;
    if (announceDevelopmentKey) {
      log.warn('using a development token encryption key; set TOKEN_ENCRYPTION_KEY for real data', {
        path: DEV_TOKEN_KEY_PATH,
        created: dev.created,
      });
    }
  }
  const box = await createSecretBox(tokenKey, config.previousTokenEncryptionKeys);
  // Workers cannot resolve names: there the URL's own check and Cloudflare's egress stand (docs/api.md,
  // "Webhooks"). Node and Bun pass webhookNet (process-module.ts), which the Worker bundle never carries.
  const resolve = webhookNet?.resolve;
  const send = webhookNet?.send;
  const xero = createXeroClient(config.xero, xeroFetch);
  const apiKeys = new ApiKeyRegistry();
  const app: AppInstance<AuthEnv> = {
    routes: appRoutes({
      apiKeys,
      xero,
      xeroConfig: config.xero,
      box,
      log,
      pushTick: TICKS.push,
      limits: config.limits,
      webhooks: config.webhooks,
      deliveryTick: TICKS.webhooks,
      ...(resolve ? { resolve } : {}),
    }),
    onError: (err, c) => answerAppError(err, c, log),
    ticks: appTicks({ config, xero, box, log, ...(send ? { send } : {}) }),
    registries: [
      { name: 'api-key registry', refreshMs: config.apiKeyRefreshMs, load: (db) => apiKeys.load(db) },
    ],
    metrics: {
      gauges: (registry, context) => observeQueueDepth(registry, context),
      counters: (registry) => {
        const countRefreshes = tokenRefreshCounter(registry);
        return {
          tickResult: (tick, result) => {
            if (tick === TICKS.refresh) countRefreshes(result as RefreshTickResult);
          },
        };
      },
    },
  };
  return { app, box };
}
