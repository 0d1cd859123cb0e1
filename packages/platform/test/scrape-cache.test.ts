// The cache of database readings that scrapes share (packages/platform/src/metrics/scrape-cache.ts).

import { describe, expect, it } from 'vitest';
import { createScrapeCache } from '../src/metrics/scrape-cache.js';

describe('scrape cache', () => {
  it('runs one read for concurrent scrapes, reuses it within the window, and reads again after', async () => {
    let now = 0;
    let reads = 0;
    const cache = createScrapeCache(5000, () => now);
    const read = async () => {
      reads += 1;
      await new Promise((r) => setTimeout(r, 10));
      return reads;
    };
    expect(await Promise.all(Array.from({ length: 100 }, () => cache('depth', read)))).toEqual(
      Array(100).fill(1),
    );
    now = 4999;
    expect(await cache('depth', read)).toBe(1);
    expect(await cache('other', read)).toBe(2);
    now = 5000;
    expect(await cache('depth', read)).toBe(3);
    expect(reads).toBe(3);
  });

  it('keeps no failure: the next scrape reads again', async () => {
    const cache = createScrapeCache(5000, () => 0);
    let calls = 0;
    const failing = async () => {
      calls += 1;
      throw new Error('timeout');
    };
    await expect(Promise.all([cache('depth', failing), cache('depth', failing)])).rejects.toThrow('timeout');
    expect(calls).toBe(1);
    await expect(cache('depth', failing)).rejects.toThrow('timeout');
    expect(calls).toBe(2);
    expect(await cache('depth', async () => 7)).toBe(7);
  });
});
