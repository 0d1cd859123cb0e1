import type { Database } from '@honest-health/platform';
import { interval } from '@honest-health/platform';
import { type SQL, sql } from 'drizzle-orm';
import { type SubWindows, subWindows, type XeroBudget } from './budget.js';
import { DEFAULT_CLAIM_PAYLOAD_BYTES } from './claim-bytes.js';
import { ofConnection } from './connection-range.js';
import { executeNamed } from './named.js';
import { rowsOf } from './rows.js';
import { slotsAdd, slotsHeld, windowAdd, windowUsed } from './window-sql.js';

// The claim: one statement that takes Xero's budget and the pushes it pays for, so it holds across
// replicas and over Neon's HTTP driver (no session, no interactive transaction). docs/xero-budget.md.

/** A claimed push, with what the tick needs of its connection (null when it has none). */
export interface ClaimedPush {
  id: string;
  connection_id: string | null;
  /** The invoice, only for a push whose send the claim recorded (`marked`); null for every other. */
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
  /** This run: a lease is never taken from another live owner, its own included (expired leases only). */
  owner: string;
  leaseMs: number;
  batchSize: number;
  budget: XeroBudget;
  /**
   * The most payload bytes (the invoices' JSON text) one claim returns: the sends stop there, though the
   * first always goes, however big. Default DEFAULT_CLAIM_PAYLOAD_BYTES.
   */
  maxPayloadBytes?: number;
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
 * A due push with no live lease: a run never takes another's lease, its own included, and a crashed
 * run's leases come back by expiry. Literal status list: it must match the partial indexes' predicate.
 */
const due = sql`p.status IN ('queued', 'failed') AND p.next_attempt_at <= now()
  AND (p.lease_expires_at IS NULL OR p.lease_expires_at < now())`;

/** The same for one tenant's pushes, read in (connection_id, next_attempt_at) order (ofConnection). */
const dueFor = (tenant: SQL) => sql`p.status IN ('queued', 'failed')
  AND ${ofConnection(tenant)} AND p.next_attempt_at <= now()
  AND (p.lease_expires_at IS NULL OR p.lease_expires_at < now())`;

/**
 * The SQLSTATE 22P02 message by which the claim's last write refuses an app minute that claims running
 * beside it spent first: the statement rolls back, and claimPushes claims again with the app row locked.
 */
const APP_MINUTE_SPENT = 'push claim: the app minute was spent by a concurrent claim';

/** Below every connection id (random, version 4): where the walk wraps round to. */
const NIL_UUID = '00000000-0000-0000-0000-000000000000';

const sendable = sql`c.status = 'active' AND g.status = 'active'
  AND g.access_token_enc IS NOT NULL AND g.access_expires_at > now() + interval '5 seconds'`;

/**
 * The most tenants with open pushes one claim looks at: it skips through them from a random one,
 * wrapping round, so its cost stays bounded however many tenants have work (one push each, say), and
 * every tenant is reached in turn. Among those it looks at, the least recently served go first.
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
function room(budget: XeroBudget): SQL {
  return sql`least(
    ${budget.concurrent} - ${slotsHeld(sql`c.budget_slots`)},
    ${budget.perMinute} - ${windowUsed(sql`c.budget_minute_counts`, sql`c.budget_minute_at`, sql`stamp.minute_at`)},
    ${budget.perDay} - ${windowUsed(sql`c.budget_day_counts`, sql`c.budget_day_at`, sql`stamp.day_at`)})`;
}

/**
 * Claims due pushes within Xero's budget and writes their lease, in one statement, so that claims on
 * many replicas and isolates run side by side without waiting for one another:
 *
 * 1. finds tenants with open pushes by skipping through the (connection_id, next_attempt_at) partial
 *    index, two probes per such tenant (the tenant, and what a claim could take of it, up to 5),
 *    from a random one, until those found could fill the batch twice over, and at most
 *    tenantsVisited() of them: tenants with nothing queued cost nothing, and neither does how full
 *    anyone's windows are (each is a fixed number of counters), and a claim over tenants with
 *    backlogs looks at as many as it can serve;
 * 2. locks, least recently served first, as many of them as the batch can use (FOR UPDATE SKIP
 *    LOCKED): a tenant another claim or a settle holds is passed over, not waited for, and a locked
 *    row is read at its latest version, so a tenant another claim served since this statement's
 *    snapshot is seen with its slots held. Only a tenant with a slot free counts;
 * 3. offers the batch and the app's minute to the locked tenants in that order, each as much as it has
 *    due, its room (at most its 5 in-flight slots, 60 a rolling minute, 5,000 a rolling day) and the
 *    payload bytes left allow, until the batch or the bytes are spent: a 10,000-push backlog takes 5
 *    and waits its turn, and a claim writes one budget row per 5 pushes where tenants have backlogs;
 * 4. grants each tenant what its row allows, written by an upsert from the latest row version; a
 *    parked tenant (429 `day`) or a paused app (429 `appminute`) gets nothing, and its pushes are not
 *    claimed (no attempt spent);
 * 5. leases that many of each tenant's oldest due pushes (FOR UPDATE SKIP LOCKED), with the slots'
 *    stamp as the lease expiry, so a crashed run's slots come back when its leases expire; returns the
 *    payload only of the pushes it recorded as sent, within maxPayloadBytes;
 * 6. counts the app's minute last, on the app row's latest version. The app row is read, not locked,
 *    at the start, unless its minute is nearly spent or the app paused: then it is locked first and
 *    claims queue there, as they must to share the last calls exactly. A claim that read room another
 *    claim spent meanwhile fails its last write (APP_MINUTE_SPENT) and is made again, locked first.
 *
 * Lock order: every statement that locks several connection rows waits for them in id order or skips
 * them, and takes the app row after them (or, a claim, before them and then skips), so none deadlock.
 * Pushes that cannot be sent (no connection, an inactive one, a token about to expire) are claimed
 * outside the budget, as ids: the tick settles them without calling Xero.
 */
export async function claimPushes(db: Database, options: ClaimOptions): Promise<Claim> {
  try {
    return await claimOnce(db, options, false);
  } catch (err) {
    if (!isAppMinuteSpent(err)) throw err;
    return claimOnce(db, options, true);
  }
}

function isAppMinuteSpent(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++)
    if (e.message.includes(APP_MINUTE_SPENT)) return true;
  return false;
}

async function claimOnce(db: Database, options: ClaimOptions, lockApp: boolean): Promise<Claim> {
  const budget = options.budget;
  const minute = subWindows(budget, 'minute');
  const day = subWindows(budget, 'day');
  // Literal status list: it must match the partial index's predicate.
  const open = sql`p.status IN ('queued', 'failed')`;
  const visits = tenantsVisited(options.batchSize);
  // Twice the batch: tenants found with due pushes may yet have no room (their slots held, parked), or
  // be locked by a claim beside this one.
  const enough = 2 * options.batchSize;
  // The first tenant after `after` with open pushes (one probe of the (connection_id, next_attempt_at)
  // index), and how many of them a claim could take now (due, no live lease), up to its in-flight
  // allowance (it never takes more in one claim): a second probe there. Its limit is a subquery so that
  // the planner costs it as the ordered index scan it is, not a sort of every open push, whatever the
  // statistics say.
  const nextTenant = (after: SQL) => sql`(
    SELECT n.id, (SELECT count(*)::int FROM (
             SELECT 1 FROM invoice_pushes p WHERE ${dueFor(sql`n.id`)}
             ORDER BY p.connection_id, p.next_attempt_at LIMIT (SELECT ${budget.concurrent}::int)) d) AS due
    FROM (SELECT p.connection_id AS id FROM invoice_pushes p WHERE ${open} AND p.connection_id > ${after}
          ORDER BY p.connection_id, p.next_attempt_at LIMIT 1) n)`;
  // A parameter, not a CTE column, so that the planner can start the index scan there.
  const start = options.from ?? crypto.randomUUID();
  const maxBytes = options.maxPayloadBytes ?? DEFAULT_CLAIM_PAYLOAD_BYTES;
  // Below this much of the app's minute left, claims take the app row first and queue there.
  const nearAppLimit = 4 * options.batchSize;
  // The payload sent: with sends recorded, exactly those; without, every budgeted push.
  const sent = options.sends ? recordsSend(options.sends) : sql`true`;
  // The claim's calls, as app_spent's upsert carries them: the newest counter of a fresh window.
  // The calls an offer grants, as spent's upsert carries them: the slots it stamps.
  const offered = sql`cardinality(excluded.budget_slots)`;
  const claimedCalls = sql`excluded.budget_minute_counts[${sql.raw(String(Math.trunc(minute.n)))}]`;
  const sizeOf = (isSent: SQL) => sql`CASE WHEN ${isSent} THEN octet_length(p.payload::text) ELSE 0 END`;
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
    await executeNamed(
      db,
      'push_claim',
      sql`/* push claim: UPDATE invoice_pushes within Xero's budget */
      WITH RECURSIVE stamp AS (
        SELECT now() AS at, now() + ${interval(options.leaseMs)} AS slot, ${start}::uuid AS start,
               ${subWindowAt(minute)} AS minute_at, ${subWindowAt(day)} AS day_at),
      app_seen AS (
        SELECT a.id, ${windowUsed(sql`a.budget_minute_counts`, sql`a.budget_minute_at`, sql`stamp.minute_at`)} AS used,
               coalesce(a.paused_until > now(), false) AS paused
        FROM xero_app_limits a CROSS JOIN stamp WHERE a.id = 'app'),
      -- Locked only near the minute's end (or when told): FOR UPDATE reads the row's latest version.
      app_held AS (
        SELECT a.id, ${windowUsed(sql`a.budget_minute_counts`, sql`a.budget_minute_at`, sql`stamp.minute_at`)} AS used,
               coalesce(a.paused_until > now(), false) AS paused
        FROM xero_app_limits a CROSS JOIN stamp
        WHERE a.id = 'app' AND (${lockApp}
          OR (SELECT s.paused OR s.used + ${nearAppLimit} >= ${budget.appPerMinute} FROM app_seen s))
        FOR UPDATE OF a),
      app AS (
        SELECT s.id, coalesce(h.used, s.used) AS used, coalesce(h.paused, s.paused) AS paused
        FROM app_seen s LEFT JOIN app_held h ON true),
      total AS (
        SELECT CASE WHEN app.paused THEN 0
                    ELSE greatest(0, least(${options.batchSize}, ${budget.appPerMinute} - app.used)) END AS n
        FROM app),
      -- Each step finds the next tenant and what a claim could take of it now (nextTenant): the walk
      -- stops once those could fill the batch twice over, or at tenantsVisited().
      open_tenants AS (
        (SELECT n.id, 1 AS k, n.due AS found FROM ${nextTenant(sql`${start}::uuid`)} n)
        UNION ALL
        SELECT n.id, t.k + 1, t.found + n.due
        FROM open_tenants t CROSS JOIN LATERAL ${nextTenant(sql`t.id`)} n
        WHERE t.k < ${visits} AND t.found < ${enough}),
      open_seen AS MATERIALIZED (
        SELECT count(id) AS n, coalesce(max(found), 0) AS found FROM open_tenants),
      wrapped AS (
        (SELECT n.id, 1 AS k, s.found + n.due AS found
         FROM open_seen s CROSS JOIN LATERAL ${nextTenant(sql`${NIL_UUID}::uuid`)} n
         WHERE s.n < ${visits} AND s.found < ${enough})
        UNION ALL
        SELECT n.id, w.k + 1, w.found + n.due
        FROM wrapped w CROSS JOIN stamp CROSS JOIN open_seen s CROSS JOIN LATERAL ${nextTenant(sql`w.id`)} n
        WHERE w.id < stamp.start AND w.k + s.n < ${visits} AND w.found < ${enough}),
      visited AS (
        SELECT id FROM open_tenants
        UNION
        SELECT w.id FROM wrapped w CROSS JOIN stamp WHERE w.id <= stamp.start),
      candidates AS (
        SELECT c.* FROM visited t CROSS JOIN LATERAL (
          -- LIMIT 1 keeps this a lookup by primary key per tenant found, never a join over every connection.
          -- What the tick needs of the connection is read here, once per tenant, not once per push.
          SELECT c.id, c.budget_served_at AS last_served, (${sendable}) AS sendable,
                 (c.parked_until IS NULL OR c.parked_until <= now()) AS unparked,
                 c.tenant_id, c.grant_id, (c.status = 'active' AND g.status = 'active') AS active, g.token_version,
                 (g.access_token_enc IS NOT NULL AND g.access_expires_at > now() + interval '5 seconds') AS token_fresh
          FROM xero_connections c CROSS JOIN LATERAL (
            -- Lateral, LIMIT 1: joined, the planner hashed the connection and scanned every grant per tenant.
            SELECT g.status, g.token_version, g.access_token_enc, g.access_expires_at
            FROM xero_grants g WHERE g.id = c.grant_id LIMIT 1) g
          WHERE c.id = t.id LIMIT 1) c),
      queue AS MATERIALIZED (
        SELECT coalesce(array_agg(id ORDER BY last_served NULLS FIRST, id), '{}') AS ids
        FROM candidates WHERE sendable AND unparked),
      -- The queue's tenants with a slot free, locked in its order as the walk asks for them (a CTE is
      -- read only as far as its reader goes, and the ordinality keeps the order without a sort), passing
      -- over those another statement holds. Their budget columns as locked: each row's latest version.
      locked AS MATERIALIZED (
        SELECT q.k, c.id, c.organization_id, c.grant_id, c.tenant_id, c.budget_slots, c.budget_minute_counts, c.budget_minute_at, c.budget_day_counts,
               c.budget_day_at
        FROM unnest((SELECT ids FROM queue)) WITH ORDINALITY AS q(id, k)
        JOIN xero_connections c ON c.id = q.id
        WHERE ${slotsHeld(sql`c.budget_slots`)} < ${budget.concurrent}
          AND (c.parked_until IS NULL OR c.parked_until <= now())
        ORDER BY q.k LIMIT ${options.batchSize}
        FOR UPDATE OF c SKIP LOCKED),
      -- Offers the batch to the locked tenants in order, each as much as it has due, room for and bytes
      -- left for, and stops once the batch or the bytes are spent: a tenant is locked, and its due
      -- pushes and room counted, only when its turn comes, so a claim's cost follows the tenants it
      -- serves. The next turn is the first locked row after this one, in the order the CTE read them.
      walk AS (
        SELECT 0::bigint AS k, 0 AS upto, 0::bigint AS bytes, NULL::uuid AS id, 0 AS n,
               NULL::uuid AS organization_id, NULL::uuid AS grant_id, NULL::text AS tenant_id
        UNION ALL
        SELECT x.k, w.upto + x.n, w.bytes + x.bytes, x.id, x.n, x.organization_id, x.grant_id, x.tenant_id
        FROM walk w CROSS JOIN total CROSS JOIN LATERAL (
          SELECT c.k, c.id, f.n, f.bytes, c.organization_id, c.grant_id, c.tenant_id
          FROM (SELECT * FROM locked WHERE locked.k > w.k LIMIT 1) c CROSS JOIN stamp
          CROSS JOIN LATERAL (SELECT greatest(0, least(total.n - w.upto, ${room(budget)}))::int AS cap) cap
          CROSS JOIN LATERAL (
            SELECT count(*)::int AS n, coalesce(sum(d.size), 0)::bigint AS bytes
            FROM (SELECT d.size, d.r, sum(d.size) OVER (ORDER BY d.r ROWS UNBOUNDED PRECEDING) AS run
                  FROM (SELECT ${sizeOf(sent)} AS size,
                               row_number() OVER (ORDER BY p.next_attempt_at, p.id) AS r
                        FROM (SELECT p.* FROM invoice_pushes p WHERE ${dueFor(sql`c.id`)}
                              ORDER BY p.connection_id, p.next_attempt_at LIMIT cap.cap) p) d) d
            WHERE d.run <= ${maxBytes} - w.bytes OR (w.bytes = 0 AND d.r = 1)) f) x
        WHERE w.upto < total.n AND w.bytes < ${maxBytes}),
      -- With what an insert would need of the row (never made: see spent), as the walk read it.
      offer AS (SELECT k, id, n, organization_id, grant_id, tenant_id FROM walk WHERE id IS NOT NULL AND n > 0),
      -- An upsert rather than an UPDATE, as app_spent below: the row is locked already, and a row
      -- another statement changed since this one's snapshot is then written from its latest version
      -- without an EvalPlanQual recheck of the whole statement. The rows exist and stay locked, so
      -- the insert never happens; its values carry the offer to the SET as EXCLUDED: the slots taken
      -- (stamped stamp.slot, as many as the offer), the sub-windows and the time served.
      spent AS (
        INSERT INTO xero_connections AS c (id, organization_id, grant_id, tenant_id, budget_slots,
                                           budget_minute_at, budget_day_at, budget_served_at)
        SELECT o.id, o.organization_id, o.grant_id, o.tenant_id, array_fill(stamp.slot, ARRAY[o.n]),
               stamp.minute_at, stamp.day_at, stamp.at
        FROM offer o CROSS JOIN stamp
        ON CONFLICT (id) DO UPDATE SET
          budget_slots = ${slotsAdd(sql`c.budget_slots`, sql`excluded.budget_slots[1]`, offered)},
          budget_minute_counts = ${windowAdd(sql`c.budget_minute_counts`, sql`c.budget_minute_at`, sql`excluded.budget_minute_at`, minute.n, offered)},
          budget_minute_at = greatest(c.budget_minute_at, excluded.budget_minute_at),
          budget_day_counts = ${windowAdd(sql`c.budget_day_counts`, sql`c.budget_day_at`, sql`excluded.budget_day_at`, day.n, offered)},
          budget_day_at = greatest(c.budget_day_at, excluded.budget_day_at),
          budget_served_at = CASE WHEN ${offered} > 0 THEN excluded.budget_served_at ELSE c.budget_served_at END
        RETURNING c.id, c.budget_slots),
      -- The walk counted the room on the row as locked, and the lock is still held: no other
      -- statement changed it since, so the offer is spent as it is, on every counter.
      granted AS (
        SELECT s.id, (SELECT count(*) FROM unnest(s.budget_slots) AS t WHERE t = stamp.slot)::int AS n
        FROM spent s CROSS JOIN stamp),
      picked AS (
        SELECT p.*, sum(p.size) OVER (ORDER BY o.k, p.next_attempt_at, p.id ROWS UNBOUNDED PRECEDING) AS run,
               row_number() OVER (ORDER BY o.k, p.next_attempt_at, p.id) AS r
        FROM granted gr JOIN offer o ON o.id = gr.id CROSS JOIN LATERAL (
          SELECT p.id, p.next_attempt_at, p.xero_in_doubt, p.xero_key_sent_at, (${sent}) AS sent,
                 ${sizeOf(sent)} AS size
          FROM invoice_pushes p WHERE ${dueFor(sql`gr.id`)}
          ORDER BY p.connection_id, p.next_attempt_at LIMIT gr.n FOR UPDATE SKIP LOCKED) p
        WHERE gr.n > 0),
      -- Ordered by connection_id too (all null here), as only invoice_pushes_connection_due_idx yields:
      -- settled pushes have no connection, so statistics say most pushes have none, and in
      -- next_attempt_at order alone the planner looked for these among every due push.
      orphans AS (
        SELECT p.id, p.xero_in_doubt, p.xero_key_sent_at, false AS sent
        FROM invoice_pushes p WHERE p.connection_id IS NULL AND ${due}
        ORDER BY p.connection_id, p.next_attempt_at LIMIT ${options.batchSize} FOR UPDATE SKIP LOCKED),
      unsendable AS (
        SELECT p.* FROM candidates c CROSS JOIN LATERAL (
          SELECT p.id, p.xero_in_doubt, p.xero_key_sent_at, false AS sent
          FROM invoice_pushes p WHERE ${dueFor(sql`c.id`)}
          ORDER BY p.connection_id, p.next_attempt_at LIMIT ${options.batchSize} FOR UPDATE SKIP LOCKED) p
        WHERE NOT c.sendable
        LIMIT ${options.batchSize}),
      -- The bytes bound holds here too, whatever the walk counted: the first push always goes.
      taken AS (
        SELECT id, xero_in_doubt, xero_key_sent_at, sent FROM picked WHERE run <= ${maxBytes} OR r = 1
        UNION ALL SELECT * FROM orphans UNION ALL SELECT * FROM unsendable),
      claimed AS (
        -- A recorded send (marked) writes what in-doubt pushes need: the key's first send time (kept if
        -- it went out before), the doubt, and the marker as first sent.
        UPDATE invoice_pushes p SET
          lease_owner = ${options.owner},
          lease_expires_at = stamp.slot,
          attempts = p.attempts + 1,
          xero_key_sent_at = CASE WHEN t.marked THEN coalesce(p.xero_key_sent_at, now()) ELSE p.xero_key_sent_at END,
          xero_in_doubt = p.xero_in_doubt OR t.marked,
          xero_marker = CASE WHEN t.marked THEN coalesce(p.xero_marker, ${options.sends?.markerPrefix ?? ''} || p.id::text)
                             ELSE p.xero_marker END,
          updated_at = now()
        FROM stamp CROSS JOIN (SELECT taken.*, taken.sent AND ${options.sends !== undefined} AS marked FROM taken) t
        WHERE p.id = t.id AND p.id = ANY(ARRAY(SELECT id FROM taken))
        RETURNING p.id, p.connection_id, CASE WHEN t.sent THEN p.payload END AS payload, p.attempts,
                  p.next_attempt_at, p.status, p.xero_key_generation, t.xero_in_doubt, p.xero_marker, t.marked,
                  (extract(epoch FROM now() - t.xero_key_sent_at) * 1000)::float8 AS xero_key_age_ms),
      -- Last, so that the app row is held from here to the commit only. Counted on its latest version: a
      -- minute spent meanwhile by claims beside this one fails the statement (claimPushes claims again).
      -- An upsert rather than an UPDATE: ON CONFLICT locks the latest version and computes the SET from
      -- it, where an UPDATE meeting a row changed since its snapshot rechecks it by EvalPlanQual, which
      -- sets up every subplan of this statement again (PostgreSQL docs, INSERT "ON CONFLICT DO UPDATE"
      -- and Concurrency Control, "Read Committed"). The row always exists (migration 0006), so the
      -- insert never happens; its values carry this claim's calls and sub-window to the SET as EXCLUDED.
      app_spent AS (
        INSERT INTO xero_app_limits AS a (id, budget_minute_counts, budget_minute_at)
        SELECT 'app', ${windowAdd(sql`'{}'::int[]`, sql`NULL::bigint`, sql`stamp.minute_at`, minute.n, sql`s.n`)},
               stamp.minute_at
        FROM (SELECT coalesce(sum(n), 0)::int AS n FROM granted) s CROSS JOIN stamp
        WHERE s.n > 0
        ON CONFLICT (id) DO UPDATE SET
          budget_minute_counts = CASE
            WHEN coalesce(a.paused_until > now(), false)
              OR ${windowUsed(sql`a.budget_minute_counts`, sql`a.budget_minute_at`, sql`excluded.budget_minute_at`)}
                 + ${claimedCalls} > ${budget.appPerMinute}
            THEN ARRAY[(${APP_MINUTE_SPENT} || a.id)::int]
            ELSE ${windowAdd(sql`a.budget_minute_counts`, sql`a.budget_minute_at`, sql`excluded.budget_minute_at`, minute.n, claimedCalls)} END,
          budget_minute_at = greatest(a.budget_minute_at, excluded.budget_minute_at),
          updated_at = now()
        RETURNING 1)
      SELECT 'push' AS kind, p.id, p.connection_id, p.payload, p.attempts, c.tenant_id, c.grant_id, c.active,
             c.token_version, c.token_fresh, NULL::int AS granted, NULL::text AS slot_us, NULL::text AS claim_us,
             NULL::text AS minute_at, NULL::text AS day_at, p.next_attempt_at, p.status, p.xero_key_generation,
             p.xero_key_age_ms, p.xero_in_doubt, p.xero_marker, p.marked
      FROM claimed p LEFT JOIN candidates c ON c.id = p.connection_id
      UNION ALL
      SELECT 'grant', NULL, gr.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, gr.n,
             (extract(epoch FROM stamp.slot) * 1000000)::bigint::text, (extract(epoch FROM stamp.at) * 1000000)::bigint::text,
             stamp.minute_at::text, stamp.day_at::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL
      FROM granted gr CROSS JOIN stamp
      WHERE gr.n > 0
      ORDER BY kind DESC, next_attempt_at`,
    ),
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
