import type { ProcessAppModule } from '@honest-health/platform';
import type { AuthEnv } from './auth.js';
import type { AppConfig } from './config.js';
import { migrations } from './migrations.gen.js';
import { buildHonestHealth, honestHealth } from './module.js';
import { systemResolver } from './webhooks/dns-resolver.js';
import { pinnedSender } from './webhooks/pinned-send.js';
import type { WebhookNet } from './webhooks/send.js';

/** node:dns and node:http: imported here, by the process runtimes only, so no Worker bundle carries them. */
export const processWebhookNet: WebhookNet = { resolve: systemResolver, send: pinnedSender(systemResolver) };

/**
 * honest-health as Node and Bun run it: the app module with the migrations boot applies, and webhook
 * deliveries pinned to the addresses they checked.
 */
export const honestHealthProcess: ProcessAppModule<AppConfig, AuthEnv> = {
  ...honestHealth,
  migrations,
  create: async (config, context) =>
    (await buildHonestHealth(config, context, fetch, { webhookNet: processWebhookNet })).app,
};
