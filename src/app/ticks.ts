import type { AppTick, Logger, TickRun } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import type { AppConfig } from './config.js';
import { sweepExpiredFlows } from './connections/connect-links.js';
import { AccessTokenCache } from './connections/grants.js';
import { CredentialsState, refreshExpiringTokens } from './connections/refresh-tokens.js';
import { restingDetach } from './push/detach-settled.js';
import { prunePushes } from './push/prune-pushes.js';
import { pushDueInvoices } from './push/tick.js';
import { deliverDueWebhooks } from './webhooks/deliver.js';
import { pruneWebhooks } from './webhooks/prune.js';
import type { Sender } from './webhooks/send.js';
import type { XeroClient } from './xero/client.js';

export const TICKS = {
  push: 'push-invoices',
  refresh: 'refresh-tokens',
  prune: 'prune-pushes',
  sweep: 'sweep',
  webhooks: 'deliver-webhooks',
  webhookRetention: 'prune-webhooks',
} as const;

export interface TickSetup {
  config: AppConfig;
  xero: XeroClient;
  box: SecretBox;
  log: Logger;
  /** Node and Bun: the sender that resolves, checks and connects to the checked address; fetch on Workers. */
  send?: Sender;
}

/** The tick functions, ready to be run by a scheduler loop (Node, Bun) or a cron trigger (Workers). */
export function createTicks({ config, xero, box, log }: TickSetup) {
  const tokens = new AccessTokenCache();
  const credentials = new CredentialsState();
  // A lease outlives the slowest push (its timeout) with room to spare; an expired one is fair game.
  const leaseMs = Math.max(60_000, config.xero.timeoutMs * 3);
  return {
    // Each run leases under its own owner (the platform's), so overlapping runs never share a lease.
    [TICKS.push]: (db: Parameters<typeof pushDueInvoices>[0], run: TickRun) =>
      pushDueInvoices(db, {
        xero,
        box,
        budget: config.xeroBudget,
        tokens,
        owner: run.owner,
        maxAttempts: config.pushMaxAttempts,
        batchSize: config.pushBatchSize,
        maxPayloadBytes: config.pushClaimMaxPayloadBytes,
        leaseMs,
        backoff: config.backoff,
        log,
      }),
    [TICKS.refresh]: (db: Parameters<typeof refreshExpiringTokens>[0], run: TickRun) =>
      refreshExpiringTokens(db, {
        xero,
        box,
        owner: run.owner,
        refreshWithinMs: 10 * 60_000,
        // At least two ticks ahead: a push's grant is refreshed by a run before the push falls due.
        aheadMs: Math.max(10 * 60_000, 2 * config.tickIntervalMs),
        keepAliveMs: config.refreshKeepAliveMs,
        leaseMs,
        batchSize: 50,
        log,
        credentials,
      }),
  };
}

/**
 * The ticks this configuration runs, built once per process or isolate (their token cache and
 * credential state with them): none without Xero. Token refresh comes first, the order a cron
 * invocation runs them in: a push with an expired token would only be deferred.
 */
export function appTicks(setup: TickSetup): AppTick[] {
  if (!setup.config.xero.clientId) {
    setup.log.warn('Xero is not configured (XERO_CLIENT_ID): the push and token-refresh ticks are off');
    return [
      sweepTick(setup.config),
      ...retentionTick(setup.config),
      webhookTick(setup),
      webhookRetentionTick(setup.config),
    ];
  }
  const ticks = createTicks(setup);
  const intervalMs = setup.config.tickIntervalMs;
  return [
    ...[TICKS.refresh, TICKS.push].map((name) => ({ name, intervalMs, run: ticks[name] })),
    sweepTick(setup.config),
    ...retentionTick(setup.config),
    webhookTick(setup),
    webhookRetentionTick(setup.config),
  ];
}

/**
 * Expired connect links and OAuth states (swept here, so no stranger's request ever pays for it), and
 * settled pushes still referencing their connection (so a disconnect never rewrites history).
 */
function sweepTick(config: TickSetup['config']): AppTick {
  const detach = restingDetach();
  return {
    name: TICKS.sweep,
    intervalMs: config.tickIntervalMs,
    run: async (db) => ({ ...(await sweepExpiredFlows(db)), ...(await detach(db)) }),
  };
}

/** Webhook deliveries: a tick of its own, so a slow receiver never holds a push. */
function webhookTick({ config, box, log, send }: TickSetup): AppTick {
  const w = config.webhooks;
  return {
    name: TICKS.webhooks,
    // The cron's period on Workers, where tick health judges every tick by it.
    intervalMs: config.tickIntervalMs,
    run: (db: Parameters<typeof deliverDueWebhooks>[0], run: TickRun) =>
      deliverDueWebhooks(db, {
        owner: run.owner,
        box,
        log,
        concurrency: 32,
        perEndpoint: 4,
        // Claims for one timeout; a run then lasts at most three, well inside a cron period.
        windowMs: w.timeoutMs,
        pollMs: 500,
        timeoutMs: w.timeoutMs,
        maxResponseBytes: w.maxResponseBytes,
        backoff: w.backoff,
        retryForMs: w.retryForMs,
        allowInsecure: w.allowInsecure,
        ...(send ? { send } : {}),
      }),
  };
}

/** Webhook retention (WEBHOOK_RETENTION_DAYS): at most 10,000 deliveries and 10,000 events a run. */
function webhookRetentionTick(config: TickSetup['config']): AppTick {
  const retentionDays = config.webhooks.retentionDays;
  return {
    name: TICKS.webhookRetention,
    intervalMs: config.tickIntervalMs,
    run: (db: Parameters<typeof pruneWebhooks>[0]) =>
      pruneWebhooks(db, { retentionDays, batchSize: 1000, maxBatches: 10 }),
  };
}

/** The retention tick, when PUSH_RETENTION_DAYS is set: at most 10,000 rows a run, 1,000 a statement. */
function retentionTick(config: TickSetup['config']): AppTick[] {
  const retentionDays = config.pushRetentionDays;
  if (retentionDays === undefined) return [];
  return [
    {
      name: TICKS.prune,
      intervalMs: config.tickIntervalMs,
      run: (db: Parameters<typeof prunePushes>[0]) =>
        prunePushes(db, { retentionDays, batchSize: 1000, maxBatches: 10 }),
    },
  ];
}
