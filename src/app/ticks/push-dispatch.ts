import type { PushOutcome, XeroClient } from '../xero/client.js';
import type { TenantLimiter } from '../xero/tenant-limiter.js';

/** A claimed push ready to send. */
export interface ReadyPush {
  /** The push id, sent as the Idempotency-Key on every attempt. */
  id: string;
  tenantId: string;
  token: string;
  /** In Xero's shape. */
  invoice: unknown;
}

export interface DispatchHandlers<P> {
  done(push: P, outcome: PushOutcome): void;
  /** The client threw (it classifies every answer, so this is a bug or the process failing). */
  failed(push: P, err: unknown): void;
  /** Not sent: the tenant has no room soon enough. Try again after `retryInMs`. */
  deferred(push: P, retryInMs: number): void;
}

/** Xero calls in flight per tick: a large batch must not open hundreds of calls at once and time them out. */
export const MAX_IN_FLIGHT = 16;
/** A tenant whose minute frees a slot later than this has the rest of its pushes left to a later tick. */
const MAX_SLOT_WAIT_MS = 1000;
/** In all, how long a batch waits for slots that nothing in it will free (held by another tick). */
const MAX_IDLE_WAIT_MS = 5000;
const IDLE_RETRY_MS = 1000;

/**
 * Sends the pushes, at most MAX_IN_FLIGHT at once and each only when the limiter gives its tenant a
 * slot. Pushes queue in one lane per tenant, so a tenant at its limit holds up only its own pushes, and
 * a finished call starts the next one at once: a single queue left a tenant-clustered batch waiting
 * behind one tenant's five slots, 100 ms at a time. Asking the limiter is synchronous, so a push that
 * has room costs no timer and no extra await.
 */
export function dispatchPushes<P extends ReadyPush>(
  pushes: readonly P[],
  xero: XeroClient,
  limiter: TenantLimiter,
  on: DispatchHandlers<P>,
): Promise<void> {
  const lanes = new Map<string, P[]>();
  for (const push of pushes) {
    const lane = lanes.get(push.tenantId);
    if (lane) lane.push(push);
    else lanes.set(push.tenantId, [push]);
  }
  return new Promise<void>((finish) => {
    let inFlight = 0;
    let idleWaited = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;

    const settleCall = (push: P) => {
      limiter.release(push.tenantId);
      inFlight -= 1;
      pump();
    };
    const send = (push: P) => {
      inFlight += 1;
      let call: Promise<PushOutcome>;
      try {
        call = xero.putInvoice(push.token, push.tenantId, push.id, push.invoice);
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
          settleCall(push);
        },
        (err: unknown) => {
          on.failed(push, err);
          settleCall(push);
        },
      );
    };

    function pump(): void {
      let soonest = Number.POSITIVE_INFINITY;
      // Round robin: a lane that sends one push goes to the back of the map, which this loop then
      // visits again (a Map iterates over entries added while iterating). So each free slot goes to
      // the tenant served longest ago, and a batch of a few big tenants ends them together rather
      // than leaving the last one to finish alone at its 5 in flight. The loop ends when every slot
      // is taken or every lane left is waiting (those stay in place and are not revisited).
      for (const [tenantId, lane] of lanes) {
        if (inFlight >= MAX_IN_FLIGHT) break;
        const wait = limiter.tryAcquire(tenantId);
        if (wait === 0) {
          send(lane.shift() as P);
          lanes.delete(tenantId);
          if (lane.length > 0) lanes.set(tenantId, lane);
        } else if (wait > MAX_SLOT_WAIT_MS) {
          // The tenant's minute is used up: none of its pushes can go before then.
          for (const push of lane) on.deferred(push, wait);
          lanes.delete(tenantId);
        } else soonest = Math.min(soonest, wait);
      }
      if (lanes.size === 0) {
        if (inFlight === 0) finish();
        return;
      }
      // Something of ours in flight will call pump() when it ends; otherwise only time frees a slot.
      if (inFlight > 0 || timer !== undefined) return;
      if (idleWaited >= MAX_IDLE_WAIT_MS) {
        for (const lane of lanes.values()) for (const push of lane) on.deferred(push, IDLE_RETRY_MS);
        lanes.clear();
        finish();
        return;
      }
      const delay = Math.min(soonest, MAX_SLOT_WAIT_MS);
      idleWaited += delay;
      timer = setTimeout(() => {
        timer = undefined;
        pump();
      }, delay);
    }

    pump();
  });
}
