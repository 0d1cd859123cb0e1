import { type SQL, sql } from 'drizzle-orm';
import { interval } from '../../platform/db/interval.js';
import type { Database } from '../../platform/db/types.js';
import { countedMs, type XeroBudget } from './budget.js';
import { rowsOf } from './rows.js';

// The claim: one statement that takes Xero's budget and the pushes it pays for, so it holds across
// replicas and over Neon's HTTP driver (no session, no interactive transaction). docs/xero-budget.md.

/** A claimed push, with what the tick needs of its connection (null when it has none). */
export interface ClaimedPush {
  id: string;
  connection_id: string | null;
  payload: unknown;
  /** Counting this attempt. */
  attempts: number;
  tenant_id: string | null;
  /** The connection's grant: the token pair it pushes with. */
  grant_id: string | null;
  /** The connection exists and is `active`, and so is its grant. */
  active: boolean | null;
  /** The grant's token_version. */
  token_version: number | null;
  /** An access token is stored and outlives the next few seconds. */
  token_fresh: boolean | null;
  /** `queued` or `failed`, as the claim found it. */
  status: string;
  /** The Idempotency-Key's generation, and how long ago (ms, database clock) it was first sent. */
  xero_key_generation: number;
  xero_key_age_ms: number | null;
  xero_in_doubt: boolean;
  xero_marker: string | null;
}

/** Budget a claim took for one tenant: the settle gives back the slots, and whatever went unused. */
export interface BudgetGrant {
  connectionId: string;
  /** Calls granted (slots taken, minute and day counted). */
  granted: number;
  /** The slots' stamp (their expiry, which is the pushes' lease expiry), microseconds since the epoch. */
  slotUs: string;
  /** When the calls were counted, microseconds since the epoch. */
  claimUs: string;
}

export interface Claim {
  pushes: ClaimedPush[];
  grants: BudgetGrant[];
}

export interface ClaimOptions {
  owner: string;
  leaseMs: number;
  batchSize: number;
  budget: XeroBudget;
}

/** A due push this owner may take. Literal status list: it must match the partial indexes' predicate. */
const due = (owner: string) => sql`p.status IN ('queued', 'failed') AND p.next_attempt_at <= now()
  AND (p.lease_expires_at IS NULL OR p.lease_expires_at < now() OR p.lease_owner = ${owner})`;

const sendable = sql`c.status = 'active' AND g.status = 'active'
  AND g.access_token_enc IS NOT NULL AND g.access_expires_at > now() + interval '5 seconds'`;

/** The calls a tenant's row still allows, read from the row itself (the latest version once locked). */
function room(b: XeroBudget): SQL {
  return sql`least(
    ${b.concurrent} - cardinality(xero_budget_live(c.budget_slots, now())),
    ${b.perMinute} - cardinality(xero_budget_live(c.budget_minute, now() - ${interval(countedMs(b, b.minuteMs))})),
    ${b.perDay} - cardinality(xero_budget_live(c.budget_day, now() - ${interval(countedMs(b, b.dayMs))})))`;
}

/**
 * Claims due pushes within Xero's budget and writes their lease, in one statement:
 *
 * 1. locks the app's row (`xero_app_limits`, id 'app') first: claims, settles and signal writes all
 *    queue there, so their updates of several connection rows never deadlock, and the app's minute
 *    is counted by one writer at a time;
 * 2. offers each tenant with due pushes and room (as the statement's snapshot shows it) a fair share
 *    of the batch and of the app's minute (least recently served first, so a 10,000-push backlog gets
 *    its share and no more), so a tenant whose slots are all held takes no share from the others;
 * 3. grants each tenant what its own row allows (5 in flight, 60 a rolling minute, 5,000 a rolling
 *    day), computed by the UPDATE from the latest row version, so two replicas claiming at once
 *    cannot both spend the same room; a parked tenant (429 `day`) or a paused app (429 `appminute`)
 *    gets nothing, and its pushes are not claimed (no attempt spent);
 * 4. leases that many of each tenant's oldest due pushes (FOR UPDATE SKIP LOCKED). A slot's stamp is
 *    the lease expiry, so a crashed replica's slots come back when its leases expire.
 *
 * Pushes that cannot be sent (no connection, an inactive one, a token about to expire) are claimed
 * outside the budget, as before: the tick settles them without calling Xero.
 */
export async function claimPushes(db: Database, o: ClaimOptions): Promise<Claim> {
  const b = o.budget;
  const rows = rowsOf<
    ClaimedPush & { kind: 'push' | 'grant'; granted: number; slot_us: string; claim_us: string }
  >(
    // The leading comment names the statement within pg_stat_activity's first 1024 bytes of it
    // (track_activity_query_size), which is all an operator, or a test, sees of a waiting claim.
    await db.execute(sql`/* push claim: UPDATE invoice_pushes within Xero's budget */
      WITH stamp AS (SELECT now() AS at, now() + ${interval(o.leaseMs)} AS slot),
      app AS (
        SELECT a.id, xero_budget_live(a.budget_minute, now() - ${interval(countedMs(b, b.minuteMs))}) AS minute,
               coalesce(a.paused_until > now(), false) AS paused
        FROM xero_app_limits a WHERE a.id = 'app' FOR UPDATE),
      total AS (
        SELECT CASE WHEN app.paused THEN 0
                    ELSE greatest(0, least(${o.batchSize}, ${b.appPerMinute} - cardinality(app.minute))) END AS n
        FROM app),
      wanting AS (
        SELECT c.id, (SELECT max(s) FROM unnest(c.budget_minute) AS s) AS last_served,
               (SELECT count(*) FROM (SELECT 1 FROM invoice_pushes p WHERE p.connection_id = c.id AND ${due(o.owner)}
                                      LIMIT ${b.concurrent}) d)::int AS due,
               ${room(b)} AS room
        FROM xero_connections c JOIN xero_grants g ON g.id = c.grant_id
        WHERE ${sendable} AND (c.parked_until IS NULL OR c.parked_until <= now())),
      ranked AS (
        SELECT id, least(due, room) AS due, row_number() OVER (ORDER BY last_served NULLS FIRST, id) AS r,
               count(*) OVER () AS n
        FROM wanting WHERE due > 0 AND room > 0),
      offer AS (
        SELECT ranked.id,
               least(ranked.due, total.n / ranked.n + CASE WHEN ranked.r <= total.n % ranked.n THEN 1 ELSE 0 END) AS n
        FROM ranked CROSS JOIN total),
      granted AS (
        UPDATE xero_connections c SET
          budget_slots = xero_budget_add(xero_budget_live(c.budget_slots, now()), stamp.slot,
                                         least(o.n, ${room(b)})::int),
          budget_minute = xero_budget_add(
            xero_budget_live(c.budget_minute, now() - ${interval(countedMs(b, b.minuteMs))}), stamp.at, least(o.n, ${room(b)})::int),
          budget_day = xero_budget_add(
            xero_budget_live(c.budget_day, now() - ${interval(countedMs(b, b.dayMs))}), stamp.at, least(o.n, ${room(b)})::int)
        FROM offer o CROSS JOIN stamp
        WHERE c.id = o.id AND o.n > 0 AND ${room(b)} > 0
        RETURNING c.id, (SELECT count(*) FROM unnest(c.budget_slots) AS s WHERE s = stamp.slot)::int AS n),
      picked AS (
        SELECT p.id FROM granted gr CROSS JOIN LATERAL (
          SELECT p.id FROM invoice_pushes p WHERE p.connection_id = gr.id AND ${due(o.owner)}
          ORDER BY p.next_attempt_at LIMIT gr.n FOR UPDATE SKIP LOCKED) p),
      orphans AS (
        SELECT p.id FROM invoice_pushes p WHERE p.connection_id IS NULL AND ${due(o.owner)}
        ORDER BY p.next_attempt_at LIMIT ${o.batchSize} FOR UPDATE SKIP LOCKED),
      unsendable AS (
        SELECT p.id FROM xero_connections c JOIN xero_grants g ON g.id = c.grant_id CROSS JOIN LATERAL (
          SELECT p.id FROM invoice_pushes p WHERE p.connection_id = c.id AND ${due(o.owner)}
          ORDER BY p.next_attempt_at LIMIT ${o.batchSize} FOR UPDATE SKIP LOCKED) p
        WHERE NOT (${sendable})
        LIMIT ${o.batchSize}),
      claimed AS (
        UPDATE invoice_pushes SET
          lease_owner = ${o.owner},
          lease_expires_at = stamp.slot,
          attempts = attempts + 1,
          updated_at = now()
        FROM stamp
        WHERE id = ANY(ARRAY(SELECT id FROM picked UNION ALL SELECT id FROM orphans UNION ALL SELECT id FROM unsendable))
        RETURNING id, connection_id, payload, attempts, next_attempt_at, status, xero_key_generation, xero_in_doubt,
                  xero_marker, (extract(epoch FROM now() - xero_key_sent_at) * 1000)::float8 AS xero_key_age_ms),
      app_spent AS (
        UPDATE xero_app_limits a SET
          budget_minute = xero_budget_add(app.minute, stamp.at, (SELECT coalesce(sum(n), 0) FROM granted)::int),
          updated_at = now()
        FROM app CROSS JOIN stamp WHERE a.id = app.id
        RETURNING 1)
      SELECT 'push' AS kind, p.id, p.connection_id, p.payload, p.attempts, c.tenant_id, c.grant_id, c.active,
             c.token_version, c.token_fresh, NULL::int AS granted, NULL::text AS slot_us, NULL::text AS claim_us,
             p.next_attempt_at, p.status, p.xero_key_generation, p.xero_key_age_ms, p.xero_in_doubt, p.xero_marker
      FROM claimed p LEFT JOIN LATERAL (
        SELECT xc.tenant_id, xc.grant_id, (xc.status = 'active' AND g.status = 'active') AS active, g.token_version,
               (g.access_token_enc IS NOT NULL AND g.access_expires_at > now() + interval '5 seconds') AS token_fresh
        FROM xero_connections xc JOIN xero_grants g ON g.id = xc.grant_id
        WHERE xc.id = p.connection_id) c ON true
      UNION ALL
      SELECT 'grant', NULL, gr.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, gr.n,
             (extract(epoch FROM stamp.slot) * 1000000)::bigint::text, (extract(epoch FROM stamp.at) * 1000000)::bigint::text,
             NULL, NULL, NULL, NULL, NULL, NULL
      FROM granted gr CROSS JOIN stamp
      WHERE (SELECT count(*) FROM app_spent) >= 0
      ORDER BY kind DESC, next_attempt_at`),
  );
  const pushes: ClaimedPush[] = [];
  const grants: BudgetGrant[] = [];
  for (const row of rows) {
    if (row.kind === 'grant') {
      grants.push({
        connectionId: row.connection_id as string,
        granted: Number(row.granted),
        slotUs: String(row.slot_us),
        claimUs: String(row.claim_us),
      });
    } else pushes.push(row);
  }
  return { pushes, grants };
}
