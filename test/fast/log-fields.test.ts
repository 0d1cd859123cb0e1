// Log fields: what an error line carries, and which context a line is logged under. Pure: a logger
// writing to an array. (test/observability.test.ts checks the same fields on a running server.)

import { createLogger, describeError, poisonReason } from '@honest-health/platform';
import { Scheduler } from '@honest-health/platform/internal/jobs/scheduler';
import { withLogContext } from '@honest-health/platform/internal/util/log-context';
import { describe, expect, it } from 'vitest';
import { until } from '../support/until.js';

describe('log fields', () => {
  const capture = () => {
    const lines: Record<string, unknown>[] = [];
    return { log: createLogger('debug', {}, (l) => lines.push(JSON.parse(l)), poisonReason), lines };
  };

  it('an error carries its SQLSTATE and whether it poisons the pool', () => {
    const readOnly = new Error('Failed query: update t set x = $1\nparams: 1', {
      cause: Object.assign(new Error('cannot execute UPDATE in a read-only transaction'), { code: '25006' }),
    });
    expect(describeError(readOnly, poisonReason)).toMatchObject({
      sqlstate: '25006',
      poisoned: true,
      poison_reason: '25006',
    });
    const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    expect(describeError(reset, poisonReason)).toMatchObject({ poisoned: true, poison_reason: 'ECONNRESET' });
    expect(describeError(reset, poisonReason).sqlstate).toBeUndefined();
    const duplicate = Object.assign(new Error('duplicate key'), { code: '23505' });
    expect(describeError(duplicate, poisonReason)).toMatchObject({ sqlstate: '23505', poisoned: false });
  });

  it('lines inside a context carry its fields, and concurrent contexts never mix', async () => {
    const { log, lines } = capture();
    const work = (id: string, delay: number) =>
      withLogContext({ request_id: id }, async () => {
        await new Promise((r) => setTimeout(r, delay));
        log.info('step', { n: 1 });
        await withLogContext({ tick: 'inner' }, async () => log.info('nested'));
      });
    await Promise.all([work('a', 20), work('b', 5)]);
    log.info('outside');
    expect(lines.map((l) => [l.msg, l.request_id, l.tick])).toEqual([
      ['step', 'b', undefined],
      ['nested', 'b', 'inner'],
      ['step', 'a', undefined],
      ['nested', 'a', 'inner'],
      ['outside', undefined, undefined],
    ]);
  });

  it('a loop that a request triggers logs under the loop, never under that request', async () => {
    const { log, lines } = capture();
    const loops = new Scheduler(log);
    let runs = 0;
    loops.register({
      name: 'push',
      intervalMs: 20,
      run: async () => {
        runs += 1;
        log.info('loop ran');
      },
    });
    loops.start();
    withLogContext({ request_id: 'r-1' }, () => loops.trigger('push'));
    await until(
      async () => runs,
      (n) => n >= 3,
    );
    await loops.stop();
    const ran = lines.filter((l) => l.msg === 'loop ran');
    expect(ran.every((l) => l.loop === 'push' && l.request_id === undefined)).toBe(true);
  });
});

describe('the poison classifier', () => {
  it('is injected: without one a summary claims nothing about poison, a child keeps it', () => {
    const readOnly = Object.assign(new Error('read-only'), { code: '25006' });
    expect(describeError(readOnly)).not.toHaveProperty('poisoned');
    const lines: Record<string, unknown>[] = [];
    const log = createLogger('debug', {}, (l) => lines.push(JSON.parse(l)), poisonReason);
    log.child({ part: 'x' }).error('failed', { err: readOnly });
    expect(lines[0]).toMatchObject({ err: { sqlstate: '25006', poisoned: true, poison_reason: '25006' } });
  });
});
