import { createLogger } from '@honest-health/platform';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../src/jobs/scheduler.js';

const quiet = createLogger('error', {}, () => {});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('scheduler', () => {
  it('never overlaps runs of a loop and keeps running after a failure', async () => {
    const scheduler = new Scheduler(quiet);
    let active = 0;
    let maxActive = 0;
    let runs = 0;
    scheduler.register({
      name: 'slow',
      intervalMs: 5,
      async run() {
        active += 1;
        maxActive = Math.max(maxActive, active);
        runs += 1;
        await sleep(30);
        active -= 1;
        if (runs === 1) throw new Error('first run fails');
      },
    });
    scheduler.start();
    await sleep(250);
    await scheduler.stop();
    expect(maxActive).toBe(1);
    expect(runs).toBeGreaterThanOrEqual(3);
  });

  it('stop() waits for the run in progress and starts no new one', async () => {
    const scheduler = new Scheduler(quiet);
    let finished = false;
    let started = 0;
    scheduler.register({
      name: 'tick',
      intervalMs: 1,
      async run() {
        started += 1;
        await sleep(200);
        finished = true;
      },
    });
    scheduler.start();
    await sleep(50);
    expect(started).toBe(1);
    await scheduler.stop();
    expect(finished).toBe(true);
    await sleep(50);
    expect(started).toBe(1);
  });
});
