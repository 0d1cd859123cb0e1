import type { Scheduler } from '../../platform/jobs/scheduler.js';
import type { TickRunner } from '../../platform/jobs/tick.js';
import type { MonitoredTick } from '../../platform/jobs/tick-health.js';
import type { Logger } from '../../platform/log.js';
import type { SecretBox } from '../../platform/secret-box.js';
import type { AppConfig } from '../config.js';
import { AccessTokenCache } from '../connections/grants.js';
import { pushDueInvoices } from '../push/tick.js';
import type { XeroClient } from '../xero/client.js';
import { CredentialsState, refreshExpiringTokens } from './refresh-tokens.js';

export const TICKS = { push: 'push-invoices', refresh: 'refresh-tokens' } as const;

export interface TickSetup {
  config: AppConfig;
  xero: XeroClient;
  box: SecretBox;
  owner: string;
  log: Logger;
}

/** The tick functions, ready to be run by a scheduler loop (Node, Bun) or a cron trigger (Workers). */
export function createTicks({ config, xero, box, owner, log }: TickSetup) {
  const tokens = new AccessTokenCache();
  const credentials = new CredentialsState();
  // A lease outlives the slowest push (its timeout) with room to spare; an expired one is fair game.
  const leaseMs = Math.max(60_000, config.xero.timeoutMs * 3);
  return {
    [TICKS.push]: (db: Parameters<typeof pushDueInvoices>[0]) =>
      pushDueInvoices(db, {
        xero,
        box,
        budget: config.xeroBudget,
        tokens,
        owner,
        maxAttempts: config.pushMaxAttempts,
        batchSize: config.pushBatchSize,
        leaseMs,
        backoff: config.backoff,
        log,
      }),
    [TICKS.refresh]: (db: Parameters<typeof refreshExpiringTokens>[0]) =>
      refreshExpiringTokens(db, {
        xero,
        box,
        owner,
        refreshWithinMs: 10 * 60_000,
        leaseMs,
        batchSize: 50,
        log,
        credentials,
      }),
  };
}

/** The ticks that run with this configuration, as tick health watches them: none without Xero. */
export function enabledTicks(config: AppConfig): MonitoredTick[] {
  if (!config.xero.clientId) return [];
  return Object.values(TICKS).map((name) => ({ name, intervalMs: config.tickIntervalMs }));
}

export function registerTicks(scheduler: Scheduler, runTick: TickRunner, setup: TickSetup): void {
  if (!setup.config.xero.clientId) {
    setup.log.warn('Xero is not configured (XERO_CLIENT_ID): the push and token-refresh ticks are off');
    return;
  }
  const ticks = createTicks(setup);
  for (const [name, tick] of Object.entries(ticks)) {
    scheduler.register({
      name,
      intervalMs: setup.config.tickIntervalMs,
      run: async () => void (await runTick<unknown>(name, tick)),
    });
  }
}
