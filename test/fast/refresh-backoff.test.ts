// The refresh tick's back-off per grant (src/app/connections/refresh-tokens.ts): a broken row gives its
// batch place up for longer and longer; a failure at Xero stays inside the 30-minute grace.
import { describe, expect, it } from 'vitest';
import { refreshBackoffMs } from '../../src/app/connections/refresh-tokens.js';

const MIN = 60_000;

describe('refresh back-off', () => {
  it('a token that does not open: 1 min, doubling to 1 h', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 20].map((n) => refreshBackoffMs(n, 'broken') / MIN)).toEqual([
      1, 2, 4, 8, 16, 32, 60, 60,
    ]);
  });

  it('a failure at Xero: the next tick, then 1 min doubling to 5, so retries keep inside the grace', () => {
    expect([1, 2, 3, 4, 5, 20].map((n) => refreshBackoffMs(n, 'xero') / MIN)).toEqual([0, 1, 2, 4, 5, 5]);
    // Before 30 minutes have passed, at least five retries.
    let waited = 0;
    let tries = 0;
    for (let n = 1; waited < 30 * MIN; n++, tries++) waited += refreshBackoffMs(n, 'xero') + MIN;
    expect(tries).toBeGreaterThanOrEqual(5);
  });
});
