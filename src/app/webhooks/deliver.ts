import type { Database, Logger } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import { sql } from 'drizzle-orm';
import { rowsOf } from '../push/rows.js';
import { secretContext } from './endpoints.js';
import { signedHeaders } from './sign.js';
import { checkEndpointUrl, checkResolved, type Resolver } from './ssrf.js';

// The delivery tick: claims due deliveries with one statement that writes their lease (as the push
// claim does), at most `perEndpoint` of any one endpoint, sends them all at once, each under its own
// timeout, and records every outcome with one statement fenced on the lease. A slow endpoint holds only
// its own few deliveries for one timeout; it never holds the push tick, which is a tick of its own.

export interface DeliveryDeps {
  owner: string;
  box: SecretBox;
  log: Logger;
  batchSize: number;
  /** Deliveries of one endpoint in flight at once. */
  perEndpoint: number;
  timeoutMs: number;
  maxResponseBytes: number;
  /** Back-off after a failed attempt: base × 2^(attempt - 1), at most max, with jitter. */
  backoff: { baseMs: number; maxMs: number };
  /** How long a delivery is retried from its event; then it is dead and its endpoint disabled. */
  retryForMs: number;
  /** WEBHOOK_ALLOW_INSECURE. */
  allowInsecure: boolean;
  /** node:dns where the runtime has it; undefined on Workers. */
  resolve?: Resolver;
  fetch?: typeof fetch;
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
  const leaseMs = deps.timeoutMs * 3 + 5_000;
  const claimed = rowsOf<Claimed>(
    await db.execute(sql`
      WITH endpoints AS (
        SELECT DISTINCT d.endpoint_id FROM webhook_deliveries d
        JOIN webhook_endpoints w ON w.id = d.endpoint_id AND w.disabled_at IS NULL
        WHERE ${due} LIMIT ${deps.batchSize}),
      taken AS (
        SELECT t.id FROM endpoints ep CROSS JOIN LATERAL (
          SELECT d.id FROM webhook_deliveries d WHERE d.endpoint_id = ep.endpoint_id AND ${due}
          ORDER BY d.next_attempt_at LIMIT ${deps.perEndpoint} FOR UPDATE SKIP LOCKED) t
        LIMIT ${deps.batchSize}),
      claimed AS (
        UPDATE webhook_deliveries d SET lease_owner = ${deps.owner},
          lease_expires_at = now() + ${leaseMs} * interval '1 millisecond',
          attempts = d.attempts + 1, updated_at = now()
        WHERE d.id = ANY(ARRAY(SELECT id FROM taken)) AND ${due}
        RETURNING d.id, d.attempts, d.event_id, d.endpoint_id)
      SELECT c.id, c.attempts, e.id AS event_id, e.type, e.data, (extract(epoch FROM e.created_at) * 1000)::float8 AS event_ms, w.id AS endpoint_id,
             w.url, w.secret_enc, w.previous_secret_enc, (w.previous_secret_expires_at > now()) AS previous_live
      FROM claimed c JOIN webhook_events e ON e.id = c.event_id JOIN webhook_endpoints w ON w.id = c.endpoint_id`),
  );
  const result: DeliveryResult = { claimed: claimed.length, delivered: 0, failed: 0 };
  if (claimed.length === 0) return result;
  const outcomes = await Promise.all(claimed.map((d) => deliverOne(d, deps)));
  for (const o of outcomes) result[o.ok ? 'delivered' : 'failed'] += 1;
  await settleDeliveries(db, deps, outcomes);
  return result;
}

async function deliverOne(d: Claimed, deps: DeliveryDeps): Promise<Outcome> {
  const fail = (error: string, status: number | null = null): Outcome => ({
    id: d.id,
    ok: false,
    status,
    error,
    retryInMs: backoffMs(d.attempts, deps.backoff),
  });
  try {
    // Checked again at each delivery: the rules may have tightened since it was registered, and a
    // name's addresses change.
    const checked = checkEndpointUrl(d.url, deps);
    if (!checked.ok) return fail(`refused: the URL ${checked.message}`);
    const refused = await checkResolved(checked.url, deps.resolve, deps);
    if (refused) return fail(`refused: ${refused}`);
    const secrets = [await deps.box.open(d.secret_enc, secretContext(d.endpoint_id))];
    if (d.previous_secret_enc && d.previous_live)
      secrets.push(await deps.box.open(d.previous_secret_enc, secretContext(d.endpoint_id)));
    const timestamp = new Date();
    const body = JSON.stringify({
      type: d.type,
      timestamp: new Date(Number(d.event_ms)).toISOString(),
      data: d.data,
    });
    const res = await (deps.fetch ?? fetch)(checked.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': 'honest-health-webhooks',
        ...(await signedHeaders(secrets, d.event_id, timestamp, body)),
      },
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(deps.timeoutMs),
    });
    await drain(res, deps.maxResponseBytes);
    if (res.status >= 200 && res.status < 300)
      return { id: d.id, ok: true, status: res.status, error: null, retryInMs: 0 };
    if (res.status >= 300 && res.status < 400)
      return fail(`answered $res.status: redirects are not followed`, res.status);
    return fail(`answered ${res.status}`, res.status);
  } catch (err) {
    const name = (err as Error)?.name;
    return fail(
      name === 'TimeoutError'
        ? `no answer within ${deps.timeoutMs} ms`
        : `could not connect: ${(err as Error)?.message ?? err}`,
    );
  }
}

/** Reads at most `cap` bytes of the answer, then drops the rest: a receiver cannot make us buffer more. */
async function drain(res: Response, cap: number): Promise<void> {
  const reader = res.body?.getReader();
  if (!reader) return;
  let read = 0;
  try {
    while (read <= cap) {
      const { done, value } = await reader.read();
      if (done) return;
      read += value.byteLength;
    }
    await reader.cancel();
  } catch {
    // The body is not needed; only the status is.
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
