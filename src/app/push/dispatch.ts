import type { LookupOutcome, PushOutcome, XeroClient } from '../xero/client.js';

/** A claimed push ready for its one Xero call: a send under its key, or a lookup by its marker. */
export interface ReadyPush {
  id: string;
  tenantId: string;
  token: string;
  /** The Idempotency-Key: the push id, or `<push id>:<generation>` (client.ts idempotencyKeyOf). */
  key: string;
  /** In Xero's shape. */
  invoice: unknown;
  /** Set: look the invoice up by this marker instead of sending it (tick.ts says when). */
  lookup: string | null;
}

export type CallOutcome = PushOutcome | LookupOutcome;

export interface DispatchHandlers<P> {
  done(push: P, outcome: CallOutcome): void;
  /** The client threw (it classifies every answer, so this is a bug or the process failing). */
  failed(push: P, err: unknown): void;
  /** Not sent: its budget's time to start ran out. Try again after `retryInMs`. */
  deferred(push: P, retryInMs: number): void;
}

/** Xero calls in flight per tick: a large batch must not open hundreds of calls at once and time them out. */
export const MAX_IN_FLIGHT = 32;
export interface DispatchOptions {
  /** Date.now() after which no call starts: the budget counted each call from its claim (budget.ts). */
  startBy: number;
  now?: () => number;
}

/**
 * Sends the pushes, at most MAX_IN_FLIGHT at once. The claim already took each one's budget in
 * Postgres (a tenant has at most its 5 in-flight slots in a batch), so no tenant waits here for
 * another; pushes go round robin over tenants so a tenant-clustered batch ends them together. A push
 * still waiting when `startBy` passes is deferred, not sent: Xero would count it later than we did.
 */
export function dispatchPushes<P extends ReadyPush>(
  pushes: readonly P[],
  xero: XeroClient,
  options: DispatchOptions,
  on: DispatchHandlers<P>,
): Promise<void> {
  const now = options.now ?? Date.now;
  const lanes = new Map<string, P[]>();
  for (const push of pushes) {
    const lane = lanes.get(push.tenantId);
    if (lane) lane.push(push);
    else lanes.set(push.tenantId, [push]);
  }
  return new Promise<void>((finish) => {
    let inFlight = 0;

    const settleCall = () => {
      inFlight -= 1;
      pump();
    };
    const send = (push: P) => {
      inFlight += 1;
      let call: Promise<CallOutcome>;
      try {
        call =
          push.lookup === null
            ? xero.putInvoice(push.token, push.tenantId, push.key, push.invoice)
            : xero.findInvoice(push.token, push.tenantId, push.lookup);
      } catch (err) {
        call = Promise.reject(err);
      }
      call.then(
        (outcome) => {
          try {
            on.done(push, outcome);
          } catch (err) {
            on.failed(push, err);
          }
          settleCall();
        },
        (err: unknown) => {
          on.failed(push, err);
          settleCall();
        },
      );
    };

    function pump(): void {
      if (lanes.size > 0 && now() > options.startBy) {
        for (const lane of lanes.values()) for (const push of lane) on.deferred(push, 0);
        lanes.clear();
      }
      // Round robin: a lane that sends one push goes to the back of the map, which this loop then
      // visits again (a Map iterates over entries added while iterating).
      for (const [tenantId, lane] of lanes) {
        if (inFlight >= MAX_IN_FLIGHT) break;
        send(lane.shift() as P);
        lanes.delete(tenantId);
        if (lane.length > 0) lanes.set(tenantId, lane);
      }
      if (lanes.size === 0 && inFlight === 0) finish();
    }

    pump();
  });
}
