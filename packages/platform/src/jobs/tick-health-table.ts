import { integer, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * Tick health: one row per (tick, instance), rewritten by every run, so the table stays as small as
 * the fleet (rows of instances gone for a week are pruned by the next write). One of the platform's own
 * tables (packages/platform/drizzle/), like the probe's heartbeat.
 * Outcomes carry a code (a SQLSTATE, an HTTP status, an errno name), never a message.
 */
export const tickHealth = pgTable(
  'tick_health',
  {
    tick: text('tick').notNull(),
    instanceId: text('instance_id').notNull(),
    lastStartedAt: timestamp('last_started_at', { withTimezone: true }),
    lastFinishedAt: timestamp('last_finished_at', { withTimezone: true }),
    lastSuccessAt: timestamp('last_success_at', { withTimezone: true }),
    lastFailureAt: timestamp('last_failure_at', { withTimezone: true }),
    consecutiveFailures: integer('consecutive_failures').notNull().default(0),
    lastErrorCode: text('last_error_code'),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ name: 'tick_health_pkey', columns: [t.tick, t.instanceId] })],
);
