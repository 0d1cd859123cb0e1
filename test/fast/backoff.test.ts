// The push back-off (src/app/push/tick.ts backoffMs): exponential in the attempt, full jitter over
// the upper half, capped. The first test was in test/ticks.test.ts; it needs no database.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { backoffMs } from '../../src/app/push/tick.js';

// Named as it was in test/ticks.test.ts.
describe('push tick', () => {
  it('grows the back-off exponentially with jitter, capped', () => {
    const backoff = { baseMs: 1000, maxMs: 60_000 };
    for (let i = 0; i < 200; i++) {
      const one = backoffMs(1, backoff);
      const four = backoffMs(4, backoff);
      const huge = backoffMs(30, backoff);
      expect(one).toBeGreaterThanOrEqual(500);
      expect(one).toBeLessThanOrEqual(1000);
      expect(four).toBeGreaterThanOrEqual(4000);
      expect(four).toBeLessThanOrEqual(8000);
      expect(huge).toBeLessThanOrEqual(60_000);
    }
  });
});

describe('push back-off', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('doubles a ceiling from the base per attempt up to the cap, and jitters over its upper half', () => {
    const backoff = { baseMs: 1000, maxMs: 60_000 };
    const ceilings = [1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000];
    // The lowest draw gives half the ceiling, the highest the ceiling itself.
    vi.spyOn(Math, 'random').mockReturnValue(0);
    expect(ceilings.map((_, i) => backoffMs(i + 1, backoff))).toEqual(ceilings.map((c) => c / 2));
    vi.spyOn(Math, 'random').mockReturnValue(1 - Number.EPSILON);
    expect(ceilings.map((_, i) => backoffMs(i + 1, backoff))).toEqual(ceilings);
  });

  it('treats attempt 0 as the first, and stays at the cap (a number) however many attempts', () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    const backoff = { baseMs: 30_000, maxMs: 3_600_000 };
    expect(backoffMs(0, backoff)).toBe(backoffMs(1, backoff));
    expect(backoffMs(1, backoff)).toBe(22_500);
    // 2 ** 1100 is Infinity: the cap must still hold, never NaN or Infinity.
    for (const attempt of [13, 100, 1100]) expect(backoffMs(attempt, backoff)).toBe(2_700_000);
  });

  it('returns whole milliseconds', () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.123456789);
    expect(Number.isInteger(backoffMs(3, { baseMs: 333, maxMs: 100_000 }))).toBe(true);
  });
});
