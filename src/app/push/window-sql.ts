import { type SQL, sql } from 'drizzle-orm';

// The bounded budget's arithmetic as SQL expressions (docs/xero-budget.md, "Where it lives"): a window
// is `counts`, one counter per fixed sub-window, oldest first, the newest being sub-window number `at`.
// Inline rather than calls of migration 0007's xero_window_* functions (which do the same, for the
// statements that run once a tick): the claim evaluates these once per tenant it looks at, and a SQL
// function with a subquery cannot be inlined, so each call pays the function's own executor.

/** Calls the window still counts at sub-window `nowAt` (a concurrent claim may have written a later `at`). */
export const windowUsed = (counts: SQL, at: SQL, nowAt: SQL): SQL =>
  sql`(CASE WHEN ${at} IS NULL OR ${nowAt} - ${at} >= cardinality(${counts}) THEN 0
       ELSE (SELECT coalesce(sum(x), 0)::int FROM unnest((${counts})[greatest(${nowAt} - ${at}, 0) + 1:]) AS x) END)`;

/** The window moved on to `nowAt` (`n` counters), with `k` calls more in its newest sub-window. */
export const windowAdd = (counts: SQL, at: SQL, nowAt: SQL, counters: number, k: SQL): SQL => {
  // A constant of the budget's configuration, written into the statement as an integer literal.
  const n = sql.raw(String(Math.trunc(counters)));
  return sql`(SELECT w[1:${n} - 1] || (w[${n}] + greatest(${k}, 0)) FROM (SELECT CASE
         WHEN ${at} IS NULL OR ${nowAt} - ${at} >= ${n} OR cardinality(${counts}) <> ${n} THEN array_fill(0, ARRAY[${n}])
         ELSE (${counts})[greatest(${nowAt} - ${at}, 0) + 1:${n}] || array_fill(0, ARRAY[greatest(${nowAt} - ${at}, 0)::int])
       END AS w) AS moved)`;
};

/** `k` calls fewer in sub-window `subAt`, if the window still holds it. */
export const windowRemove = (counts: SQL, at: SQL, subAt: SQL, k: SQL): SQL =>
  sql`(SELECT CASE WHEN ${at} IS NULL OR ${k} IS NULL OR ${k} <= 0 OR i < 1 OR i > cardinality(${counts}) THEN ${counts}
         ELSE (${counts})[1:i - 1] || greatest((${counts})[i] - ${k}, 0) || (${counts})[i + 1:] END
       FROM (SELECT (cardinality(${counts}) - (${at} - ${subAt}))::int AS i) AS position)`;

/** Slots (lease expiries) still held. */
export const slotsHeld = (slots: SQL): SQL =>
  sql`(SELECT count(*)::int FROM unnest(${slots}) AS s WHERE s > now())`;

/** The slots still held, and `k` more stamped `stamp`. */
export const slotsAdd = (slots: SQL, stamp: SQL, k: SQL): SQL =>
  sql`(ARRAY(SELECT s FROM unnest(${slots}) AS s WHERE s > now()) || array_fill(${stamp}, ARRAY[greatest(${k}, 0)]))`;

/**
 * The slots without `k` of those stamped `stampUs` (microseconds since the epoch): migration 0006's
 * xero_budget_remove, inline, so that the settle's cached plan holds it instead of the function's own
 * executor planning it again on every settle.
 */
export const slotsRemove = (slots: SQL, stampUs: SQL, k: SQL): SQL =>
  sql`(SELECT coalesce(array_agg(s ORDER BY s), '{}') FROM (
         SELECT s, row_number() OVER (PARTITION BY (extract(epoch FROM s) * 1000000)::bigint = ${stampUs}) AS k
         FROM unnest(${slots}) AS s) t
       WHERE (extract(epoch FROM s) * 1000000)::bigint <> ${stampUs} OR k > ${k})`;
