// The episode's rules on a clock the test moves: the damping schedule, the end of an episode and its
// summary. (test/failover-episodes.test.ts proves the same against real databases.)

import { createLogger } from '@honest-health/platform';
import { describe, expect, it } from 'vitest';
import { FailoverEpisodes } from '../src/db/episode.js';

function setup() {
  let now = 1_000_000;
  const lines: Record<string, unknown>[] = [];
  const log = createLogger('debug', {}, (l) => lines.push(JSON.parse(l)));
  const episodes = new FailoverEpisodes(log, { now: () => now, quietMs: 60_000 });
  return {
    episodes,
    lines,
    advance: (ms: number) => {
      now += ms;
    },
    at: () => now,
  };
}

describe('a failover episode', () => {
  it('disposes a pool from before the episode at once, then a fresh one only at 0.5, 1, 2 ... 30 s of age', () => {
    const { episodes, advance, at } = setup();
    const before = at() - 10_000;
    episodes.sign('poison', '25006', 'request');
    expect(episodes.decide('app', before)).toBe('dispose');
    // Pools rebuilt right away, poisoned again on every step of 100 ms: when may each go?
    let built = at();
    const ages: number[] = [];
    for (let step = 0; step < 700; step++) {
      advance(100);
      episodes.sign('poison', '25006', 'request');
      if (episodes.decide('app', built) === 'dispose') {
        ages.push(at() - built);
        built = at();
      }
    }
    expect(ages).toEqual([500, 1000, 2000, 4000, 8000, 16_000, 30_000]);
    // The probe pool has its own schedule inside the same episode.
    expect(episodes.decide('probe', before)).toBe('dispose');
  });

  it('warns once at the start and sums up at the first write-proving probe 5 s after the last sign', () => {
    const { episodes, lines, advance } = setup();
    episodes.sign('poison', '57P01', 'tick push-invoices');
    advance(200);
    episodes.sign('probe', 'in recovery', 'probe');
    advance(3000);
    // Too soon after the last sign: a load balancer may still alternate (about 3 s when measured), and
    // the pools may just have settled on connections to the new node.
    episodes.healthy();
    advance(1900);
    episodes.healthy();
    expect(episodes.active).toBe(true);
    advance(100);
    episodes.healthy();
    expect(episodes.active).toBe(false);
    const warnings = lines.filter((l) => l.level === 'warn');
    expect(warnings.map((l) => l.msg)).toEqual([
      'database connection episode started: disposing pools',
      'database read-only episode ended after 5.2 s: 0 disposals, 1 probes',
    ]);
    expect(warnings[1]).toMatchObject({
      episode: 'read-only',
      ended_by: 'write proven',
      poisoned: 1,
      probes: 1,
    });
  });

  it('ends after a quiet minute without probes, dated to the quiet spell, and starts afresh after', () => {
    const { episodes, lines, advance, at } = setup();
    episodes.sign('poison', '25006', 'request');
    advance(61_000);
    expect(episodes.active).toBe(false);
    expect(lines.at(-1)).toMatchObject({ ended_by: 'quiet', seconds: 60 });
    episodes.sign('poison', '25006', 'request');
    // A new episode: the pool built during the last one counts as from before this one.
    expect(episodes.decide('app', at() - 1000)).toBe('dispose');
    expect(lines.filter((l) => /episode started/.test(String(l.msg)))).toHaveLength(2);
  });

  it('never damps outside an episode', () => {
    const { episodes, at } = setup();
    expect(episodes.decide('app', at())).toBe('dispose');
    expect(episodes.decide('app', at())).toBe('dispose');
  });
});
