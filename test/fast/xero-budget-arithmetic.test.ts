// The parts of the shared Xero budget that need no database: the limits and how long a call stays
// counted (src/app/push/budget.ts), reading Xero's limit headers (src/app/xero/client.ts), and the
// dispatcher that sends what a claim granted (src/app/push/dispatch.ts). The claim itself is SQL and
// is tested against Postgres in test/xero-budget.test.ts and test/push-tick.test.ts.
import { describe, expect, it } from 'vitest';
import { loadAppConfig } from '../../src/app/config.js';
import { countedMs, shortenedXeroBudget, XERO_BUDGET } from '../../src/app/push/budget.js';
import {
  type DispatchHandlers,
  dispatchPushes,
  MAX_IN_FLIGHT,
  type ReadyPush,
} from '../../src/app/push/dispatch.js';
import { limitSignals, type PushOutcome, type XeroClient } from '../../src/app/xero/client.js';

describe('the Xero budget', () => {
  it("is Xero's published limits: 5 in flight, 60 a minute and 5,000 a day per tenant, 10,000 a minute per app", () => {
    expect(XERO_BUDGET).toMatchObject({
      concurrent: 5,
      perMinute: 60,
      perDay: 5000,
      appPerMinute: 10_000,
      minuteMs: 60_000,
      dayMs: 86_400_000,
    });
  });

  it('counts a call for its window plus the time it may wait to be sent, so Xero never counts more', () => {
    expect(countedMs(XERO_BUDGET, XERO_BUDGET.minuteMs)).toBe(62_000);
    expect(countedMs(XERO_BUDGET, XERO_BUDGET.dayMs)).toBe(86_402_000);
    expect(countedMs({ ...XERO_BUDGET, sendWithinMs: 100 }, 3000)).toBe(3100);
  });

  it("is the same budget in a server's configuration and in a test that shares its shortened minute", () => {
    const sandbox = { DATABASE_URL: 'memory://', XERO_API_URL: 'http://127.0.0.1:4010' };
    const env = { ...sandbox, XERO_BUDGET_TEST_MINUTE_MS: '3000' };
    expect(loadAppConfig(env).xeroBudget).toEqual(shortenedXeroBudget(3000, XERO_BUDGET.dayMs));
    // A fifteenth of the shortened minute to start, unless the test gives every sharer longer.
    expect(loadAppConfig(env).xeroBudget).toMatchObject({ minuteMs: 3000, sendWithinMs: 200 });
    const longer = { ...env, XERO_BUDGET_TEST_SEND_WITHIN_MS: '1000' };
    expect(loadAppConfig(longer).xeroBudget).toEqual(shortenedXeroBudget(3000, XERO_BUDGET.dayMs, 1000));
    expect(loadAppConfig(longer).xeroBudget).toMatchObject({ sendWithinMs: 1000 });
    // Xero's own windows keep Xero's 2 s to start.
    expect(loadAppConfig({ DATABASE_URL: 'memory://' }).xeroBudget).toEqual(XERO_BUDGET);
  });

  it("refuses a shortened budget against Xero's real API, naming every test setting", () => {
    const shortened = {
      XERO_BUDGET_TEST_MINUTE_MS: '3000',
      XERO_BUDGET_TEST_DAY_MS: '60000',
      XERO_BUDGET_TEST_SEND_WITHIN_MS: '1000',
    };
    expect(() => loadAppConfig(shortened)).toThrow(
      /XERO_BUDGET_TEST_MINUTE_MS is for the Xero sandbox only.*XERO_BUDGET_TEST_DAY_MS .*XERO_BUDGET_TEST_SEND_WITHIN_MS /,
    );
    expect(() =>
      loadAppConfig({ XERO_API_URL: 'https://api.xero.com/', XERO_BUDGET_TEST_DAY_MS: '60000' }),
    ).toThrow(/^[^\n]*XERO_BUDGET_TEST_DAY_MS is for the Xero sandbox only[^\n]*$/);
    // A bad URL is named as such (one line), not thrown as a TypeError from the budget check.
    expect(() => loadAppConfig({ XERO_API_URL: 'nope', XERO_BUDGET_TEST_MINUTE_MS: '3000' })).toThrow(
      /XERO_API_URL must be an https:\/\/ URL/,
    );
    // Xero's own windows, spelt out, are not a shortening.
    expect(loadAppConfig({ XERO_BUDGET_TEST_MINUTE_MS: '60000' }).xeroBudget).toEqual(XERO_BUDGET);
  });
});

describe("Xero's limit headers", () => {
  it('reads X-MinLimit-Remaining, X-DayLimit-Remaining and X-AppMinLimit-Remaining', () => {
    const headers = new Headers({
      'X-MinLimit-Remaining': '59',
      'X-DayLimit-Remaining': '4999',
      'X-AppMinLimit-Remaining': '9998',
    });
    expect(limitSignals(headers)).toEqual({ minRemaining: 59, dayRemaining: 4999, appMinRemaining: 9998 });
    expect(limitSignals(new Headers({ 'x-minlimit-remaining': '0' }))).toEqual({
      minRemaining: 0,
      dayRemaining: null,
      appMinRemaining: null,
    });
  });

  it('ignores values that are not a count, and answers undefined when no header says anything', () => {
    expect(limitSignals(new Headers())).toBeUndefined();
    for (const value of ['', ' ', '-1', '1.5', 'ten', '1e3x']) {
      expect(limitSignals(new Headers({ 'x-minlimit-remaining': value })), value).toBeUndefined();
    }
    expect(limitSignals(new Headers({ 'x-daylimit-remaining': '12', 'x-minlimit-remaining': 'x' }))).toEqual({
      minRemaining: null,
      dayRemaining: 12,
      appMinRemaining: null,
    });
  });
});

interface Call {
  push: ReadyPush;
  answer(outcome?: PushOutcome): void;
  fail(err: unknown): void;
}

/** A Xero client whose putInvoice calls wait until the test answers them. */
function heldXero() {
  const calls: Call[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const xero = {
    putInvoice(token: string, tenantId: string, id: string, invoice: unknown) {
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      return new Promise<PushOutcome>((resolve, reject) => {
        calls.push({
          push: { id, tenantId, token, key: id, invoice, lookup: null },
          answer: (outcome = { kind: 'ok', invoiceId: `inv-${id}` }) => {
            inFlight -= 1;
            resolve(outcome);
          },
          fail: (err) => {
            inFlight -= 1;
            reject(err);
          },
        });
      });
    },
  } as unknown as XeroClient;
  return { xero, calls, maxInFlight: () => maxInFlight };
}

function recorder() {
  const events: string[] = [];
  const on: DispatchHandlers<ReadyPush> = {
    done: (push, outcome) => void events.push(`done ${push.id} ${outcome.kind}`),
    failed: (push, err) => void events.push(`failed ${push.id} ${(err as Error).message}`),
    deferred: (push, retryInMs) => void events.push(`deferred ${push.id} ${retryInMs}`),
  };
  return { events, on };
}

const pushesOf = (tenantId: string, n: number): ReadyPush[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `${tenantId}${i + 1}`,
    tenantId,
    token: 't',
    key: `${tenantId}${i + 1}`,
    invoice: {},
    lookup: null,
  }));

const settled = () => new Promise((r) => setTimeout(r, 0));

describe('the dispatcher', () => {
  it('sends round robin over tenants, so a tenant-clustered batch is not sent one tenant after another', async () => {
    const { xero, calls } = heldXero();
    const { on } = recorder();
    const done = dispatchPushes(
      [...pushesOf('a', 3), ...pushesOf('b', 3), ...pushesOf('c', 1)],
      xero,
      { startBy: Infinity },
      on,
    );
    expect(calls.map((c) => c.push.id)).toEqual(['a1', 'b1', 'c1', 'a2', 'b2', 'a3', 'b3']);
    for (const call of calls) call.answer();
    await done;
  });

  it(`keeps at most ${MAX_IN_FLIGHT} calls in flight, and starts the next as one ends`, async () => {
    const { xero, calls, maxInFlight } = heldXero();
    const { events, on } = recorder();
    const pushes = [...pushesOf('a', 40), ...pushesOf('b', 40)];
    const done = dispatchPushes(pushes, xero, { startBy: Infinity }, on);
    expect(calls).toHaveLength(MAX_IN_FLIGHT);
    calls[0]?.answer();
    await settled();
    expect(calls).toHaveLength(MAX_IN_FLIGHT + 1);
    for (let answered = 1; answered < pushes.length; answered++) {
      calls[answered]?.answer();
      await settled();
    }
    await done;
    expect(maxInFlight()).toBe(MAX_IN_FLIGHT);
    expect(new Set(calls.map((c) => c.push.id)).size).toBe(pushes.length);
    expect(events.filter((e) => e.startsWith('done'))).toHaveLength(pushes.length);
  });

  it('defers, unsent, every push still waiting when the time to start has passed', async () => {
    let now = 1000;
    const { xero, calls } = heldXero();
    const { events, on } = recorder();
    const pushes = pushesOf('a', MAX_IN_FLIGHT + 3);
    const done = dispatchPushes(pushes, xero, { startBy: 1500, now: () => now }, on);
    expect(calls).toHaveLength(MAX_IN_FLIGHT);
    now = 1501;
    calls[0]?.answer();
    await settled();
    // The slot that came free starts nothing: Xero would count the call later than the claim did.
    expect(calls).toHaveLength(MAX_IN_FLIGHT);
    expect(events.filter((e) => e.startsWith('deferred'))).toEqual([
      `deferred a${MAX_IN_FLIGHT + 1} 0`,
      `deferred a${MAX_IN_FLIGHT + 2} 0`,
      `deferred a${MAX_IN_FLIGHT + 3} 0`,
    ]);
    for (const call of calls.slice(1)) call.answer();
    await done;
    expect(events.filter((e) => e.startsWith('done'))).toHaveLength(MAX_IN_FLIGHT);
  });

  it('sends nothing when the time to start passed before dispatch', async () => {
    const { xero, calls } = heldXero();
    const { events, on } = recorder();
    await dispatchPushes(pushesOf('a', 2), xero, { startBy: 0, now: () => 1 }, on);
    expect(calls).toEqual([]);
    expect(events).toEqual(['deferred a1 0', 'deferred a2 0']);
  });

  it('reports a client that throws or rejects, and a handler that throws, as failed, and still finishes', async () => {
    const { xero, calls } = heldXero();
    const throwing = {
      putInvoice: (token: string, tenantId: string, id: string, invoice: unknown) => {
        if (id === 'a1') throw new Error('thrown at once');
        return xero.putInvoice(token, tenantId, id, invoice);
      },
    } as XeroClient;
    const { events, on } = recorder();
    const handlers: DispatchHandlers<ReadyPush> = {
      ...on,
      done: (push, outcome) => {
        if (push.id === 'a3') throw new Error('handler bug');
        on.done(push, outcome);
      },
    };
    const done = dispatchPushes(pushesOf('a', 3), throwing, { startBy: Infinity }, handlers);
    calls[0]?.fail(new Error('network error'));
    calls[1]?.answer({ kind: 'transient', reason: 'Xero answered 503' });
    await done;
    expect(events.sort()).toEqual([
      'failed a1 thrown at once',
      'failed a2 network error',
      'failed a3 handler bug',
    ]);
  });

  it('finishes at once with nothing to send', async () => {
    const { xero } = heldXero();
    const { events, on } = recorder();
    await dispatchPushes([], xero, { startBy: Infinity }, on);
    expect(events).toEqual([]);
  });
});
