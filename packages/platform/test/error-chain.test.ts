// The one walk over what an error wraps (error-chain.ts): ordered, bounded and cycle-safe, and the log,
// the poison classifier and the error codes all read errors through it. Pure: no database.

import {
  causeChain,
  describeError,
  errorCode,
  isPoolExhausted,
  poisonReason,
  rootCause,
  viaAnyWrapper,
} from '@honest-health/platform';
import { describe, expect, it } from 'vitest';

const chainOf = (length: number): Error => {
  let err = new Error(`e${length - 1}`);
  for (let i = length - 2; i >= 0; i--) err = new Error(`e${i}`, { cause: err });
  return err;
};
const messages = (items: Iterable<unknown>) => [...items].map((e) => (e as Error).message);

describe('the cause-chain walker', () => {
  it('yields the error and its causes outermost first, at most 8 levels', () => {
    expect(messages(causeChain(chainOf(3)))).toEqual(['e0', 'e1', 'e2']);
    expect(messages(causeChain(chainOf(20)))).toEqual(['e0', 'e1', 'e2', 'e3', 'e4', 'e5', 'e6', 'e7']);
    expect(messages(causeChain(chainOf(20), { maxDepth: 2 }))).toEqual(['e0', 'e1']);
  });

  it('visits each error once when the chain loops back on itself', () => {
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    a.cause = b;
    expect(messages(causeChain(a))).toEqual(['a', 'b']);
    expect(rootCause(a)).toBe(b);
    const self = new Error('self');
    self.cause = self;
    expect(messages(causeChain(self, { links: viaAnyWrapper }))).toEqual(['self']);
  });

  it('follows only `cause` of Errors unless told, and every wrapper when told', () => {
    const hidden = Object.assign(new Error('neon'), { sourceError: new Error('inner') });
    expect(messages(causeChain(hidden))).toEqual(['neon']);
    expect(messages(causeChain(hidden, { links: viaAnyWrapper }))).toEqual(['neon', 'inner']);
    // A string cause ends the chain; undefined and null are never yielded.
    expect([...causeChain(new Error('x', { cause: 'why' }))].at(-1)).toBe('why');
    expect([...causeChain(undefined)]).toEqual([]);
    expect([...causeChain(new Error('x', { cause: null }))]).toHaveLength(1);
  });

  it('stops after 32 errors however wide the wrappers are', () => {
    const wide = new AggregateError(
      Array.from({ length: 100 }, (_, i) => new Error(`leaf ${i}`)),
      'all failed',
    );
    expect([...causeChain(wide, { links: viaAnyWrapper })]).toHaveLength(32);
  });
});

describe('its readers', () => {
  it('the poison classifier finds the outermost reason through any wrapper, and a cycle ends', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const aggregate = new AggregateError([new Error('first'), refused], 'all failed');
    expect(poisonReason(new Error('Failed query: select 1', { cause: aggregate }))).toBe('ECONNREFUSED');
    const loop = new Error('wrapper');
    loop.cause = new Error('inner', { cause: loop });
    expect(poisonReason(loop)).toBeUndefined();
    expect(
      isPoolExhausted(new Error('x', { cause: new Error('timeout exceeded when trying to connect') })),
    ).toBe(true);
  });

  it('the log summary nests the outermost error and up to four causes, each once', () => {
    const deep = describeError(chainOf(10));
    const nested: string[] = [];
    for (let s: typeof deep | undefined = deep; s; s = s.cause) nested.push(s.message);
    expect(nested).toEqual(['e0', 'e1', 'e2', 'e3', 'e4']);
    const a = new Error('a');
    a.cause = new Error('b', { cause: a });
    const cyclic = describeError(a);
    expect(cyclic.cause?.message).toBe('b');
    expect(cyclic.cause?.cause).toBeUndefined();
  });

  it('error codes read the first code along the chain', () => {
    const pg = Object.assign(new Error('read-only'), { code: '25006' });
    expect(errorCode(new Error('Failed query', { cause: pg }))).toBe('25006');
    expect(errorCode('a string')).toBeUndefined();
  });
});
