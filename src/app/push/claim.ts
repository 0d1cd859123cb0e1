import type { Database } from '@honest-health/platform';
import { interval } from '@honest-health/platform';
import { type SQL, sql } from 'drizzle-orm';
import { type SubWindows, subWindows, type XeroBudget } from './budget.js';
import { ofConnection } from './connection-range.js';
import { rowsOf } from './rows.js';
import { slotsAdd, slotsHeld, windowAdd, windowUsed } from './window-sql.js';

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
  /** The marker this push's invoice carries (written by the claim when it records a send). */
  xero_marker: string | null;
  /**
   * The claim recorded a send of this push as about to happen (ClaimOptions.sends): its row now says
   * the key went out and is in doubt. The other fields are as the claim found them, so that a push
   * not sent after all can be given back as it was.
   */
  marked: boolean;
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
  /** The minute's and the day's sub-windows the calls were counted in (budget.ts `subWindows`). */
  minuteAt: string;
  dayAt: string;
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
  /** Where the walk over tenants with open pushes starts (a connection id); random when unset. */
  from?: string;
  /** Record the sends among the claimed pushes as about to happen; unset: the claim records none. */
  sends?: SendRecord;
}

/**
 * How the claim records a send before it happens, in the same UPDATE that leases the push (the tick's
 * exactly-once record, docs/ticks.md): the key's first send time, the doubt, and the marker.
 */
export interface SendRecord {
  /** A push's marker is this followed by its id (XeroClient.marker with an empty id). */
  markerPrefix: string;
  /** A push in doubt whose key is at least this old is looked up, not sent (tick.ts `looksUp`). */
  resendWithinMs: number;
}

/**
 * A due push no live run holds: not even this owner's own lease is taken back (an owner is one run;
 * its leases come back by expiry). Literal status list: it must match the partial indexes' predicate.
 */
const due = () => sql`p.status IN ('queued', 'failed') AND p.next_attempt_at <= now()
  AND (p.lease_expires_at IS NULL OR p.lease_expires_at < now())`;

/** The same for one tenant's pushes, read in (connection_id, next_attempt_at) order (ofConnection). */
const dueFor = (tenant: SQL) => sql`p.status IN ('queued', 'failed')
  AND ${ofConnection(tenant)} AND p.next_attempt_at <= now()
  AND (p.lease_expires_at IS NULL OR p.lease_expires_at < now())`;

const sendable = sql`c.status = 'active' AND g.status = 'active'
  AND g.access_token_enc IS NOT NULL AND g.access_expires_at > now() + interval '5 seconds'`;

/**
 * The most tenants with open pushes one claim looks at: it skips through them from a random one,
 * wrapping round, so its cost stays bounded however many tenants have work, and every tenant is
 * reached in turn. Among those it looks at, the least recently served go first.
 */
export const tenantsVisited = (batchSize: number) => Math.max(200, 4 * batchSize);

/** The current sub-window's number for `w`: epoch milliseconds ÷ its length (budget.ts). */
export const subWindowAt = (w: SubWindows, at: SQL = sql`now()`) =>
  sql`floor(extract(epoch FROM ${at}) * 1000 / ${w.subMs})::bigint`;

/**
 * Whether the claim records a send of push `p` (of a sendable tenant): every push it does not look up
 * instead (tick.ts `looksUp`, the same conditions on the row as found).
 */
function recordsSend(sends: SendRecord | undefined): SQL {
  if (!sends) return sql`false`;
  return sql`NOT ((p.xero_in_doubt AND p.xero_key_sent_at IS NOT NULL
                   AND p.xero_key_sent_at <= now() - ${interval(sends.resendWithinMs)})
              OR (p.xero_key_generation = 0 AND p.xero_key_sent_at IS NULL AND p.status = 'failed'))`;
}

/** The calls a tenant's row still allows, read from the row itself (the latest version once locked). */
function room(b: XeroBudget): SQL {
  return sql`least(
    ${b.concurrent} - ${slotsHeld(sql`c.budget_slots`)},
    ${b.perMinute} - ${windowUsed(sql`c.budget_minute_counts`, sql`c.budget_minute_at`, sql`stamp.minute_at`)},
    ${b.perDay} - ${windowUsed(sql`c.budget_day_counts`, sql`c.budget_day_at`, sql`stamp.day_at`)})`;
}

/**
 * Claims due pushes within Xero's budget and writes their lease, in one statement:
 *
 * 1. locks the app's row (`xero_app_limits`, id 'app') first: claims, settles and signal writes all
 *    queue there, so their updates of several connection rows never deadlock, and the app's minute
 *    is counted by one writer at a time;
 * 2. finds tenants with open pushes by skipping through the (connection_id, next_attempt_at) partial
 *    index, one probe per such tenant, from a random one and at most tenantsVisited() of them:
 *    tenants with nothing queued cost nothing, and neither does how full anyone's windows are (each
 *    is a fixed number of counters);
 * 3. offers the batch and the app's minute to them least recently served first, each as much as it
 *    has due and room for (at most its 5 in-flight slots, as the statement's snapshot shows them),
 *    until the batch is spent: a 10,000-push backlog takes 5 and waits its turn, a tenant whose slots
 *    are all held takes nothing from the others, and a claim writes one budget row per 5 pushes where
 *    tenants have backlogs, not one per push;
 * 4. grants each tenant what its own row allows (5 in flight, 60 a rolling minute, 5,000 a rolling
 *    day), computed by the UPDATE from the latest row version, so two replicas claiming at once
 *    cannot both spend the same room; a parked tenant (429 `day`) or a paused app (429 `appminute`)
 *    gets nothing, and its pushes are not claimed (no attempt spent);
 * 5. leases that many of each tenant's oldest due pushes (FOR UPDATE SKIP LOCKED). A slot's stamp is
 *    the lease expiry, so a crashed replica's slots come back when its leases expire.
 *
 * Pushes that cannot be sent (no connection, an inactive one, a token about to expire) are claimed
 * outside the budget, as before: the tick settles them without calling Xero.
 */
export async function claimPushes(db: Database, o: ClaimOptions): Promise<Claim> {
  const b = o.budget;
  const minute = subWindows(b, 'minute');
  const day = subWindows(b, 'day');
  // Literal status list: it must match the partial index's predicate.
  const open = sql`p.status IN ('queued', 'failed')`;
  const visits = tenantsVisited(o.batchSize);
  // A parameter, not a CTE column, so that the planner can start the index scan there.
  const start = o.from ?? crypto.randomUUID();
  const rows = rowsOf<
    ClaimedPush & {
      kind: 'push' | 'grant';
      granted: number;
      slot_us: string;
      claim_us: string;
      minute_at: string;
      day_at: string;
    }
  >(
    // The leading comment names the statement within pg_stat_activity's first 1024 bytes of it
    // (track_activity_query_size), which is all an operator, or a test, sees of a waiting claim.
    await db.execute(sql`/* push claim: UPDATE invoice_pushes within Xero's budget */
      WITH RECURSIVE stamp AS (
        SELECT now() AS at, now() + ${interval(o.leaseMs)} AS slot, ${start}::uuid AS start,
               ${subWindowAt(minute)} AS minute_at, ${subWindowAt(day)} AS day_at),
      app AS (
        SELECT a.id, ${windowUsed(sql`a.budget_minute_counts`, sql`a.budget_minute_at`, sql`stamp.minute_at`)} AS used,
               coalesce(a.paused_until > now(), false) AS paused
        FROM xero_app_limits a CROSS JOIN stamp WHERE a.id = 'app' FOR UPDATE OF a),
      total AS (
        SELECT CASE WHEN app.paused THEN 0
                    ELSE greatest(0, least(${o.batchSize}, ${b.appPerMinute} - app.used)) END AS n
        FROM app),
      open_tenants AS (
        (SELECT p.connection_id AS id, 1 AS k FROM invoice_pushes p CROSS JOIN stamp
         WHERE ${open} AND p.connection_id > ${start}::uuid ORDER BY p.connection_id LIMIT 1)
        UNION ALL
        SELECT (SELECT p.connection_id FROM invoice_pushes p WHERE ${open} AND p.connection_id > t.id
                ORDER BY p.connection_id LIMIT 1), t.k + 1
        FROM open_tenants t WHERE t.id IS NOT NULL AND t.k < ${visits}),
      wrapped AS (
        (SELECT p.connection_id AS id, 1 AS k FROM invoice_pushes p
         WHERE ${open} AND p.connection_id IS NOT NULL AND (SELECT count(id) FROM open_tenants) < ${visits}
         ORDER BY p.connection_id LIMIT 1)
        UNION ALL
        SELECT (SELECT p.connection_id FROM invoice_pushes p WHERE ${open} AND p.connection_id > w.id
                ORDER BY p.connection_id LIMIT 1), w.k + 1
        FROM wrapped w CROSS JOIN stamp
        WHERE w.id IS NOT NULL AND w.id < stamp.start AND w.k + (SELECT count(id) FROM open_tenants) < ${visits}),
      visited AS (
        SELECT id FROM open_tenants WHERE id IS NOT NULL
        UNION
        SELECT w.id FROM wrapped w CROSS JOIN stamp WHERE w.id IS NOT NULL AND w.id <= stamp.start),
      candidates AS (
        SELECT c.* FROM visited t CROSS JOIN LATERAL (
          -- LIMIT 1 keeps this a lookup by primary key per tenant found, never a join over every connection.
          SELECT c.id, c.budget_served_at AS last_served, (${sendable}) AS sendable,
                 (c.parked_until IS NULL OR c.parked_until <= now()) AS unparked
          FROM xero_connections c JOIN xero_grants g ON g.id = c.grant_id
          WHERE c.id = t.id LIMIT 1) c),
      -- Materialized: referenced once, it would be inlined into the walk's recursive term and
      -- aggregated again on every step.
      queue AS MATERIALIZED (
        SELECT coalesce(array_agg(id ORDER BY last_served NULLS FIRST, id), '{}') AS ids
        FROM candidates WHERE sendable AND unparked),
      -- Offers the batch to the queue in order, each tenant as much as it has due and room for, and
      -- stops once the batch is spent: a tenant's due pushes and room are counted only when its turn
      -- comes, so a claim's cost follows the tenants it serves, not the tenants it looked at.
      walk AS (
        SELECT 0 AS i, 0 AS upto, NULL::uuid AS id, 0 AS n
        UNION ALL
        SELECT w.i + 1, w.upto + x.n, x.id, x.n
        FROM walk w CROSS JOIN queue q CROSS JOIN total CROSS JOIN LATERAL (
          SELECT c.id, greatest(0, least(total.n - w.upto,
                   (SELECT count(*) FROM (SELECT 1 FROM invoice_pushes p WHERE ${dueFor(sql`c.id`)}
                                          ORDER BY p.connection_id, p.next_attempt_at LIMIT ${b.concurrent}) d)::int,
                   ${room(b)}))::int AS n
          FROM xero_connections c CROSS JOIN stamp WHERE c.id = q.ids[w.i + 1]) x
        WHERE w.i < cardinality(q.ids) AND w.upto < total.n),
      offer AS (SELECT id, n FROM walk WHERE id IS NOT NULL),
      granted AS (
        -- The room is computed once, from the row's latest version (an UPDATE that waited for the row
        -- re-reads it), and spent on every counter. A tenant whose room is gone by then gets 0.
        UPDATE xero_connections c SET
          (budget_slots, budget_minute_counts, budget_minute_at, budget_day_counts, budget_day_at, budget_served_at) = (
            SELECT ${slotsAdd(sql`c.budget_slots`, sql`stamp.slot`, sql`r.g`)},
                   ${windowAdd(sql`c.budget_minute_counts`, sql`c.budget_minute_at`, sql`stamp.minute_at`, minute.n, sql`r.g`)},
                   greatest(c.budget_minute_at, stamp.minute_at),
                   ${windowAdd(sql`c.budget_day_counts`, sql`c.budget_day_at`, sql`stamp.day_at`, day.n, sql`r.g`)},
                   greatest(c.budget_day_at, stamp.day_at),
                   CASE WHEN r.g > 0 THEN stamp.at ELSE c.budget_served_at END
            FROM (SELECT greatest(0, least(o.n, ${room(b)}))::int AS g) AS r)
        FROM offer o CROSS JOIN stamp
        WHERE c.id = o.id AND o.n > 0 AND ${slotsHeld(sql`c.budget_slots`)} < ${b.concurrent}
          AND c.id = ANY(ARRAY(SELECT id FROM offer WHERE n > 0))
        RETURNING c.id, (SELECT count(*) FROM unnest(c.budget_slots) AS s WHERE s = stamp.slot)::int AS n),
      picked AS (
        SELECT p.* FROM granted gr CROSS JOIN LATERAL (
          SELECT p.id, p.xero_in_doubt, p.xero_key_sent_at,
                 (${recordsSend(o.sends)}) AS marked
          FROM invoice_pushes p WHERE ${dueFor(sql`gr.id`)}
          ORDER BY p.connection_id, p.next_attempt_at LIMIT gr.n FOR UPDATE SKIP LOCKED) p
        WHERE gr.n > 0),
      orphans AS (
        SELECT p.id, p.xero_in_doubt, p.xero_key_sent_at, false AS marked
        FROM invoice_pushes p WHERE p.connection_id IS NULL AND ${due()}
        ORDER BY p.next_attempt_at LIMIT ${o.batchSize} FOR UPDATE SKIP LOCKED),
      unsendable AS (
        SELECT p.* FROM candidates c CROSS JOIN LATERAL (
          SELECT p.id, p.xero_in_doubt, p.xero_key_sent_at, false AS marked
          FROM invoice_pushes p WHERE ${dueFor(sql`c.id`)}
          ORDER BY p.connection_id, p.next_attempt_at LIMIT ${o.batchSize} FOR UPDATE SKIP LOCKED) p
        WHERE NOT c.sendable
        LIMIT ${o.batchSize}),
      taken AS (SELECT * FROM picked UNION ALL SELECT * FROM orphans UNION ALL SELECT * FROM unsendable),
      claimed AS (
        -- A recorded send (taken.marked) writes what in-doubt pushes need: the key's first send time
        -- (kept if it went out before), the doubt, and the marker as first sent.
        UPDATE invoice_pushes p SET
          lease_owner = ${o.owner},
          lease_expires_at = stamp.slot,
          attempts = p.attempts + 1,
          xero_key_sent_at = CASE WHEN t.marked THEN coalesce(p.xero_key_sent_at, now()) ELSE p.xero_key_sent_at END,
          xero_in_doubt = p.xero_in_doubt OR t.marked,
          xero_marker = CASE WHEN t.marked THEN coalesce(p.xero_marker, ${o.sends?.markerPrefix ?? ''} || p.id::text)
                             ELSE p.xero_marker END,
          updated_at = now()
        FROM stamp CROSS JOIN taken t
        WHERE p.id = t.id AND p.id = ANY(ARRAY(SELECT id FROM taken))
        RETURNING p.id, p.connection_id, p.payload, p.attempts, p.next_attempt_at, p.status, p.xero_key_generation,
                  t.xero_in_doubt, p.xero_marker, t.marked,
                  (extract(epoch FROM now() - t.xero_key_sent_at) * 1000)::float8 AS xero_key_age_ms),
      app_spent AS (
        UPDATE xero_app_limits a SET
          budget_minute_counts = ${windowAdd(
            sql`a.budget_minute_counts`,
            sql`a.budget_minute_at`,
            sql`stamp.minute_at`,
            minute.n,
            sql`(SELECT coalesce(sum(n), 0) FROM granted)::int`,
          )},
          budget_minute_at = greatest(a.budget_minute_at, stamp.minute_at),
          updated_at = now()
        FROM app CROSS JOIN stamp WHERE a.id = app.id AND EXISTS (SELECT 1 FROM granted WHERE n > 0)
        RETURNING 1)
      SELECT 'push' AS kind, p.id, p.connection_id, p.payload, p.attempts, c.tenant_id, c.grant_id, c.active,
             c.token_version, c.token_fresh, NULL::int AS granted, NULL::text AS slot_us, NULL::text AS claim_us,
             NULL::text AS minute_at, NULL::text AS day_at, p.next_attempt_at, p.status, p.xero_key_generation,
             p.xero_key_age_ms, p.xero_in_doubt, p.xero_marker, p.marked
      FROM claimed p LEFT JOIN LATERAL (
        SELECT xc.tenant_id, xc.grant_id, (xc.status = 'active' AND g.status = 'active') AS active, g.token_version,
               (g.access_token_enc IS NOT NULL AND g.access_expires_at > now() + interval '5 seconds') AS token_fresh
        FROM xero_connections xc JOIN xero_grants g ON g.id = xc.grant_id
        WHERE xc.id = p.connection_id LIMIT 1) c ON true
      UNION ALL
      SELECT 'grant', NULL, gr.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, gr.n,
             (extract(epoch FROM stamp.slot) * 1000000)::bigint::text, (extract(epoch FROM stamp.at) * 1000000)::bigint::text,
             stamp.minute_at::text, stamp.day_at::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL
      FROM granted gr CROSS JOIN stamp
      WHERE gr.n > 0 AND (SELECT count(*) FROM app_spent) >= 0
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
        minuteAt: String(row.minute_at),
        dayAt: String(row.day_at),
      });
    } else pushes.push(row);
  }
  return { pushes, grants };
}
