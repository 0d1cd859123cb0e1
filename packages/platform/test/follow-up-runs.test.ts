import { describe, expect, it } from 'vitest';
import { FollowUpRuns } from '../src/lifecycle/follow-up-runs.js';

/** A run that stays in flight until released. */
function gate() {
  let release!: () => void;
  const done = new Promise<void>((r) => (release = r));
  return { done, release };
}

describe('follow-up runs (a tick scheduled on an isolate while it runs)', () => {
  it('runs at once when nothing runs', async () => {
    const runs = new FollowUpRuns();
    let calls = 0;
    await runs.schedule('push', async () => {
      calls += 1;
    });
    expect(calls).toBe(1);
  });

  it('queues one follow-up however many ask while a run is in flight, and each waits for it', async () => {
    const runs = new FollowUpRuns();
    const first = gate();
    const order: string[] = [];
    const inFlight = runs.schedule('push', async () => {
      order.push('first');
      await first.done;
    });
    const a = runs.schedule('push', async () => void order.push('follow-up'));
    const b = runs.schedule('push', async () => void order.push('never'));
    let settled = 0;
    for (const p of [a, b]) {
      void p.then(() => {
        settled += 1;
      });
    }
    await new Promise((r) => setTimeout(r, 10));
    expect(order).toEqual(['first']);
    expect(settled).toBe(0);
    first.release();
    await Promise.all([inFlight, a, b]);
    expect(order).toEqual(['first', 'follow-up']);
    // With nothing in flight any more, the next one runs at once again.
    await runs.schedule('push', async () => void order.push('later'));
    expect(order).toEqual(['first', 'follow-up', 'later']);
  });

  it('keeps ticks apart, and a failed run does not stop the follow-up', async () => {
    const runs = new FollowUpRuns();
    const order: string[] = [];
    const failing = runs.schedule('push', async () => {
      order.push('push failed');
      throw new Error('boom');
    });
    const other = runs.schedule('refresh', async () => void order.push('refresh'));
    const followUp = runs.schedule('push', async () => void order.push('push again'));
    await Promise.all([failing, other, followUp]);
    expect(order).toEqual(['push failed', 'refresh', 'push again']);
  });

  it("runs a cron's own run after the run in flight and the one queued, and later calls wait for it", async () => {
    const runs = new FollowUpRuns();
    const first = gate();
    const order: string[] = [];
    const inFlight = runs.schedule('push', async () => {
      order.push('request');
      await first.done;
    });
    const queued = runs.schedule('push', async () => void order.push('follow-up'));
    const cron = runs.scheduleOwn('push', async () => void order.push('cron'));
    const later = runs.schedule('push', async () => void order.push('never'));
    first.release();
    await Promise.all([inFlight, queued, cron, later]);
    expect(order).toEqual(['request', 'follow-up', 'cron']);
    // A cron with nothing in flight runs at once.
    await runs.scheduleOwn('push', async () => void order.push('next cron'));
    expect(order).toEqual(['request', 'follow-up', 'cron', 'next cron']);
  });

  it('queues one cron run however many crons fire while a slow run is in flight', async () => {
    const runs = new FollowUpRuns();
    const slow = gate();
    const order: string[] = [];
    const inFlight = runs.scheduleOwn('push', async () => {
      order.push('cron 1');
      await slow.done;
    });
    const crons = [2, 3, 4].map((n) => runs.scheduleOwn('push', async () => void order.push(`cron ${n}`)));
    slow.release();
    await Promise.all([inFlight, ...crons]);
    expect(order).toEqual(['cron 1', 'cron 2']);
  });
});
