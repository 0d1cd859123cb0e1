import type { MetricsRegistry } from '@honest-health/platform';
import type { RefreshTickResult } from '../connections/refresh-tokens.js';

const OUTCOMES = {
  refreshed: 'refreshed',
  superseded: 'superseded',
  needsReauth: 'needs_reauth',
  failed: 'failed',
  undecryptable: 'undecryptable',
  leaseLost: 'lease_lost',
  invalidClient: 'invalid_client',
} as const satisfies Partial<Record<keyof RefreshTickResult, string>>;

/** Counts Xero token refreshes by outcome, from the refresh tick's result. */
export function tokenRefreshCounter(registry: MetricsRegistry): (result: RefreshTickResult) => void {
  const refreshes = registry.counter({
    name: 'honest_health_token_refreshes_total',
    help: 'Xero token refreshes, by outcome',
    labelNames: ['outcome'],
  });
  for (const outcome of Object.values(OUTCOMES)) refreshes.inc({ outcome }, 0);
  return (result) => {
    for (const [field, outcome] of Object.entries(OUTCOMES) as [keyof typeof OUTCOMES, string][]) {
      if (result[field] > 0) refreshes.inc({ outcome }, result[field]);
    }
  };
}
