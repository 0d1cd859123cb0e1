import type { Database, Logger } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import { sql } from 'drizzle-orm';
import { rowsOf } from '../push/rows.js';
import { secretContext } from './endpoints.js';
import { fetchSender, type Sender } from './send.js';
import { signedHeaders } from './sign.js';
import { checkEndpointUrl } from './ssrf.js';

// The delivery tick, a pump: it claims due deliveries with one statement that writes their lease (as
// the push claim does), oldest-waiting endpoint first and at most `perEndpoint` in flight for any one
// endpoint (its live leases count, whichever run holds them), sends them concurrently (at most
// `concurrency`), each under its own timeout, and settles each as it finishes (what finished together,
// in one statement fenced on the lease). While sends are in flight it claims again whenever one
// finishes, or every `pollMs`: a slow endpoint holds only its own few deliveries, never the next claim,
// another endpoint's deliveries, or the push tick (a tick of its own).
//
// A run ends when nothing is due and nothing is in flight; an endpoint that failed in it is not claimed
// again by it. It claims for `windowMs`; then, for one timeout more, only for endpoints with nothing in
// flight in this run (a slow endpoint gets no more and drains); then it claims nothing and awaits what
// is in flight. So a run lasts at most windowMs plus two timeouts, and is awaited whole, even when a
// claim fails (on Workers, inside the scheduled handler's waitUntil).

export interface DeliveryDeps {
  owner: string;
  box: SecretBox;
  log: Logger;
  /** Deliveries one run has in flight at once. */
  concurrency: number;
  /** Deliveries of one endpoint in flight at once (counting every run's live leases). */
  perEndpoint: number;
  /** How long a run keeps claiming. */
  windowMs: number;
  /** While sends are in flight and nothing more was due: how often the run looks again. */
  pollMs: number;
  timeoutMs: number;
  maxResponseBytes: number;
  /** Back-off after a failed attempt: base × 2^(attempt - 1), at most max, with jitter. */
  backoff: { baseMs: number; maxMs: number };
  /** How long a delivery is retried from its event; then it is dead and its endpoint disabled. */
  retryForMs: number;
  /** WEBHOOK_ALLOW_INSECURE. */
  allowInsecure: boolean;
  /** pinnedSender on Node and Bun (resolves, checks and connects to the checked address); fetch on Workers. */
  send?: Sender;
}

interface Claimed {
  id: string;
  attempts: number;
  event_id: string;
  type: string;
  data: unknown;
  event_ms: number;
  endpoint_id: string;
  url: string;
  secret_enc: string;
  previous_secret_enc: string | null;
  previous_live: boolean | null;
}

interface Outcome {
  id: string;
  ok: boolean;
  status: number | null;
  error: string | null;
  retryInMs: number;
}

export interface DeliveryResult {
  claimed: number;
  delivered: number;
  failed: number;
}

const due = sql`d.status IN ('pending', 'failed') AND d.next_attempt_at <= now()
  AND (d.lease_expires_at IS NULL OR d.lease_expires_at < now())`;

export async function deliverDueWebhooks(db: Database, deps: DeliveryDeps): Promise<DeliveryResult> {
  const started = Date.now();
  const send = deps.send ?? fetchSender;
  const result: DeliveryResult = { claimed: 0, delivered: 0, failed: 0 };
  // Each send in flight, with its endpoint.
  const inFlight = new Map<Promise<void>, string>();
  // An endpoint that failed in this run gets no more of it: its back-off decides when it is tried next.
  const failedEndpoints = new Set<string>();
  const settler = coalescingSettler(db, deps);
  const wakeup = alarm();

  const start = (d: Claimed) => {
    const p: Promise<void> = deliverOne(d, deps, send).then(async (o) => {
      result[o.ok ? 'delivered' : 'failed'] += 1;
      if (!o.ok) failedEndpoints.add(d.endpoint_id);
      await settler.add(o);
      inFlight.delete(p);
      wakeup.ring();
    });
    inFlight.set(p, d.endpoint_id);
  };

  try {
    for (;;) {
      const elapsed = Date.now() - started;
      if (elapsed >= deps.windowMs + deps.timeoutMs) break;
      const room = deps.concurrency - inFlight.size;
      let got = 0;
      if (room > 0) {
        const exclude = [...failedEndpoints, ...(elapsed >= deps.windowMs ? inFlight.values() : [])];
        const claimed = await claim(db, deps, room, exclude);
        got = claimed.length;
        result.claimed += got;
        for (const d of claimed) start(d);
      }
      if (got === 0 && inFlight.size === 0) break;
      await wakeup.wait(deps.pollMs);
    }
  } finally {
    await Promise.all(inFlight.keys());
    await settler.idle();
  }
  return result;
}

/**
 * One statement: leases up to `limit` due deliveries, fair across endpoints. Each endpoint's room is
 * perEndpoint less its live leases; every endpoint's first goes before any endpoint's second (round
 * robin), the endpoint waiting longest first. (No SQL comments: they would ship in the Worker bundle.)
 */
async function claim(db: Database, deps: DeliveryDeps, limit: number, exclude: string[]): Promise<Claimed[]> {
  const leaseMs = deps.timeoutMs * 3 + 5_000;
  return rowsOf<Claimed>(
    await db.execute(sql`
      WITH endpoints AS (
        SELECT d.endpoint_id, min(d.next_attempt_at) AS oldest FROM webhook_deliveries d
        JOIN webhook_endpoints w ON w.id = d.endpoint_id AND w.disabled_at IS NULL
        WHERE ${due} AND d.endpoint_id <> ALL(${sql.param(exclude)}::uuid[])
        GROUP BY d.endpoint_id ORDER BY oldest LIMIT ${limit}),
      taken AS (
        SELECT id FROM (
          SELECT t.id, ep.oldest, row_number() OVER (PARTITION BY ep.endpoint_id ORDER BY t.next_attempt_at) AS rank
          FROM endpoints ep CROSS JOIN LATERAL (
            SELECT d.id, d.next_attempt_at FROM webhook_deliveries d WHERE d.endpoint_id = ep.endpoint_id AND ${due}
            ORDER BY d.next_attempt_at
            LIMIT greatest(0, ${deps.perEndpoint} - (SELECT count(*) FROM webhook_deliveries x
              WHERE x.endpoint_id = ep.endpoint_id AND x.status IN ('pending', 'failed') AND x.lease_expires_at >= now()))
            FOR UPDATE SKIP LOCKED) t) l
        ORDER BY rank, oldest LIMIT ${limit}),
      claimed AS (
        UPDATE webhook_deliveries d SET lease_owner = ${deps.owner},
          lease_expires_at = now() + ${leaseMs} * interval '1 millisecond',
          attempts = d.attempts + 1, updated_at = now()
        WHERE d.id = ANY(ARRAY(SELECT id FROM taken)) AND ${due}
        RETURNING d.id, d.attempts, d.event_id, d.endpoint_id)
      SELECT c.id, c.attempts, c.event_id, e.type, e.data, (extract(epoch FROM e.created_at) * 1000)::float8 AS event_ms,
             c.endpoint_id, w.url, w.secret_enc, w.previous_secret_enc, (w.previous_secret_expires_at > now()) AS previous_live
      FROM claimed c JOIN webhook_events e ON e.id = c.event_id JOIN webhook_endpoints w ON w.id = c.endpoint_id`),
  );
}

/** Resolves at `ring()` or after `ms`; a ring while nobody waits is kept for the next wait. */
function alarm() {
  let rung = false;
  let wake: (() => void) | undefined;
  return {
    ring() {
      rung = true;
      wake?.();
    },
    wait(ms: number): Promise<void> {
      if (rung) {
        rung = false;
        return Promise.resolve();
      }
      return new Promise((resolve) => {
        const timer = setTimeout(() => wake?.(), ms);
        wake = () => {
          clearTimeout(timer);
          wake = undefined;
          rung = false;
          resolve();
        };
      });
    },
  };
}

/**
 * Settles outcomes as they come: those that finish while a settle runs go together in the next one.
 * add() resolves once its outcome is settled (its lease released), so a claim after it sees the room.
 */
function coalescingSettler(db: Database, deps: DeliveryDeps) {
  const queue: { outcome: Outcome; settled: () => void }[] = [];
  let running: Promise<void> | undefined;
  let failure: unknown;
  const drain = async () => {
    while (queue.length > 0) {
      const batch = queue.splice(0);
      try {
        await settleDeliveries(
          db,
          deps,
          batch.map((b) => b.outcome),
        );
      } catch (err) {
        // Unsettled rows keep their lease until it expires, then are sent again.
        failure ??= err;
      } finally {
        for (const b of batch) b.settled();
      }
    }
  };
  // Started again when it ends with work queued in between (after its loop's last look at the queue).
  const kick = () => {
    if (running || queue.length === 0) return;
    running = drain().finally(() => {
      running = undefined;
      kick();
    });
  };
  return {
    add(outcome: Outcome): Promise<void> {
      const settled = new Promise<void>((resolve) => queue.push({ outcome, settled: resolve }));
      kick();
      return settled;
    },
    async idle() {
      while (running) await running;
      if (failure) throw failure;
    },
  };
}

async function deliverOne(d: Claimed, deps: DeliveryDeps, send: Sender): Promise<Outcome> {
  const fail = (error: string, status: number | null = null): Outcome => ({
    id: d.id,
    ok: false,
    status,
    error,
    retryInMs: backoffMs(d.attempts, deps.backoff),
  });
  try {
    // Checked again at each delivery: the rules may have tightened since it was registered. The
    // addresses a name resolves to are checked by the sender, as it connects.
    const checked = checkEndpointUrl(d.url, deps);
    if (!checked.ok) return fail(`refused: the URL ${checked.message}`);
    const secrets = [await deps.box.open(d.secret_enc, secretContext(d.endpoint_id))];
    if (d.previous_secret_enc && d.previous_live)
      secrets.push(await deps.box.open(d.previous_secret_enc, secretContext(d.endpoint_id)));
    const timestamp = new Date();
    const body = JSON.stringify({
      type: d.type,
      timestamp: new Date(Number(d.event_ms)).toISOString(),
      data: d.data,
    });
    const status = await send(checked.url, {
      headers: {
        'content-type': 'application/json',
        'user-agent': 'honest-health-webhooks',
        ...(await signedHeaders(secrets, d.event_id, timestamp, body)),
      },
      body,
      timeoutMs: deps.timeoutMs,
      maxResponseBytes: deps.maxResponseBytes,
      allowLoopback: deps.allowInsecure,
    });
    if (status >= 200 && status < 300) return { id: d.id, ok: true, status, error: null, retryInMs: 0 };
    if (status >= 300 && status < 400) return fail(`answered ${status}: redirects are not followed`, status);
    return fail(`answered ${status}`, status);
  } catch (err) {
    const name = (err as Error)?.name;
    // pinned-send.ts's RefusedAddressError, by name: the Worker bundle, which never throws it, stays without it.
    if (name === 'RefusedAddressError') return fail(`refused: ${(err as Error).message}`);
    return fail(
      name === 'TimeoutError'
        ? `no answer within ${deps.timeoutMs} ms`
        : `could not connect: ${(err as Error)?.message ?? err}`,
    );
  }
}

export function backoffMs(attempt: number, b: { baseMs: number; maxMs: number }): number {
  const exp = Math.min(b.maxMs, b.baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(exp * (0.8 + Math.random() * 0.4));
}

/**
 * One statement for the batch, fenced on the lease: delivered; failed and due again after its back-off;
 * or dead when its event is older than retryForMs, which also disables the endpoint with a reason.
 */
async function settleDeliveries(db: Database, deps: DeliveryDeps, outcomes: Outcome[]): Promise<void> {
  const col = <T>(pick: (o: Outcome) => T) => sql.param(outcomes.map(pick));
  await db.execute(sql`
    WITH v AS (
      SELECT * FROM unnest(${col((o) => o.id)}::uuid[], ${col((o) => o.ok)}::boolean[], ${col((o) => o.status)}::int[],
                           ${col((o) => o.error)}::text[], ${col((o) => o.retryInMs)}::bigint[])
        AS v(id, ok, status, error, retry_ms)),
    settled AS (
      UPDATE webhook_deliveries d SET
        status = CASE WHEN v.ok THEN 'delivered'
                      WHEN e.created_at <= now() - ${deps.retryForMs} * interval '1 millisecond' THEN 'dead'
                      ELSE 'failed' END,
        delivered_at = CASE WHEN v.ok THEN now() ELSE d.delivered_at END,
        next_attempt_at = CASE WHEN v.ok THEN d.next_attempt_at ELSE now() + v.retry_ms * interval '1 millisecond' END,
        last_status = v.status,
        last_error = CASE WHEN v.ok THEN NULL ELSE left(v.error, 1000) END,
        lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
      FROM v, webhook_events e
      WHERE d.id = v.id AND e.id = d.event_id AND d.lease_owner = ${deps.owner}
      RETURNING d.endpoint_id, d.status, d.last_error)
    UPDATE webhook_endpoints w SET disabled_at = now(), updated_at = now(),
      disabled_reason = 'deliveries failed for ' || ${Math.round(deps.retryForMs / 3_600_000)} || ' hours; last: ' || s.last_error
    FROM (SELECT DISTINCT ON (endpoint_id) endpoint_id, last_error FROM settled WHERE status = 'dead') s
    WHERE w.id = s.endpoint_id AND w.disabled_at IS NULL`);
}
