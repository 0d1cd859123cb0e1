import { errorCode } from '../util/error-chain.js';
import type { Logger } from '../util/log.js';
import {
  APP_MIGRATIONS_TABLE,
  lastAppliedAt,
  type MigrationClass,
  PLATFORM_MIGRATIONS_TABLE,
  tableExists,
} from './migrate.js';
import { latestPlatformMigrationAt, platformSchemaNeeds } from './migrations.gen.js';
import type { Release } from './releases.js';
import { neededRemovals } from './schema-needs.js';
import type { DatabasePool } from './types.js';

// Can this release serve on the schema the database has? The one rule of every runtime (DESIGN.md §4):
// a schema ahead of the release by expand migrations serves; one a contract took something from that the
// release reads or writes does not, and says which migration and what; one behind the release needs
// migrating first (a process migrates at boot; a Worker waits for `npm run db:migrate`).

/** What a release bundles of one migration set. */
export interface BundledSchema {
  /** Its newest migration's `createdAt`. */
  latestMigrationAt: number;
  /** Every column it reads or writes; unknown (an older bundle): any contract ahead stops it. */
  needs?: readonly string[];
}

/** Whether a release can serve on the database's schema, and why not. */
export type SchemaVerdict =
  | { status: 'current' }
  /** Ahead by migrations this release survives: it serves. */
  | { status: 'ahead'; migrations: string[] }
  | { status: 'behind'; set: 'platform' | 'app'; applied: number; bundled: number }
  /** A contract removed what this release needs: it must not serve. */
  | { status: 'contracted'; migration: string; removes: string[] };

type AppliedRow = {
  set: 'platform' | 'app' | 'platform:max' | 'app:max';
  created_at: string | number | null;
  tag: string | null;
  class: MigrationClass | null;
  removes: unknown;
};

/**
 * The verdict for the platform's and the app's migrations, in one round trip on a database this
 * release's migrator has touched (an isolate's boot waits for it); a database only older tools
 * migrated takes a few more.
 */
export async function checkSchema(pool: DatabasePool, app: BundledSchema): Promise<SchemaVerdict> {
  const platform: BundledSchema = {
    latestMigrationAt: latestPlatformMigrationAt,
    needs: platformSchemaNeeds,
  };
  const rows = await appliedSince(pool, platform.latestMigrationAt, app.latestMigrationAt);
  // The platform's tables are named in the app's needs too where the app's schema declares them.
  const needs = [...(platform.needs ?? []), ...(app.needs ?? [])];
  const ahead: string[] = [];
  for (const [set, bundled] of [
    ['platform', platform],
    ['app', app],
  ] as const) {
    const newest = Number(rows.find((r) => r.set === `${set}:max`)?.created_at ?? 0);
    if (newest < bundled.latestMigrationAt) {
      return { status: 'behind', set, applied: newest, bundled: bundled.latestMigrationAt };
    }
    for (const row of rows.filter((r) => r.set === set)) {
      const label = `${set === 'platform' ? 'platform:' : ''}${row.tag ?? `migration at ${row.created_at}`}`;
      if (row.class === 'expand') {
        ahead.push(label);
        continue;
      }
      const removes = parseRemoves(row.removes);
      // A contract of unknown removals, or a release of unknown needs: nothing proves it safe.
      const hit =
        row.class === null || removes === undefined || bundled.needs === undefined
          ? (removes ?? ['(unknown)'])
          : neededRemovals(removes, needs);
      if (hit.length > 0) return { status: 'contracted', migration: label, removes: hit };
      ahead.push(label);
    }
  }
  return ahead.length > 0 ? { status: 'ahead', migrations: ahead } : { status: 'current' };
}

/** One line for a log or a failed boot. */
export function describeVerdict(verdict: SchemaVerdict): string {
  switch (verdict.status) {
    case 'current':
      return 'the database schema is at the bundled migrations';
    case 'ahead':
      return `the database schema is ahead by ${verdict.migrations.join(', ')}, which this release survives`;
    case 'behind':
      return `the database schema is behind the bundled ${verdict.set} migrations (run npm run db:migrate)`;
    case 'contracted':
      return `contract migration ${verdict.migration} removed ${verdict.removes.join(', ')}, which this release needs: deploy a newer release`;
  }
}

const parseRemoves = (v: unknown): string[] | undefined =>
  v === null || v === undefined ? undefined : ((typeof v === 'string' ? JSON.parse(v) : v) as string[]);

async function appliedSince(pool: DatabasePool, platformAt: number, appAt: number): Promise<AppliedRow[]> {
  try {
    const { rows } = await pool.query<AppliedRow>(
      `SELECT 'platform' AS set, created_at, tag, class, removes FROM ${PLATFORM_MIGRATIONS_TABLE} WHERE created_at > $1
       UNION ALL SELECT 'app', created_at, tag, class, removes FROM ${APP_MIGRATIONS_TABLE} WHERE created_at > $2
       UNION ALL SELECT 'platform:max', max(created_at), NULL, NULL, NULL FROM ${PLATFORM_MIGRATIONS_TABLE}
       UNION ALL SELECT 'app:max', max(created_at), NULL, NULL, NULL FROM ${APP_MIGRATIONS_TABLE}
       ORDER BY 2`,
      [platformAt, appAt],
    );
    return rows;
  } catch (err) {
    // undefined_table (a new database) or undefined_column (tables only older tools wrote)
    if (errorCode(err) !== '42P01' && errorCode(err) !== '42703') throw err;
  }
  const rows: AppliedRow[] = [];
  for (const [set, table, since] of [
    ['platform', PLATFORM_MIGRATIONS_TABLE, platformAt],
    ['app', APP_MIGRATIONS_TABLE, appAt],
  ] as const) {
    if (!(await tableExists(pool, table))) continue;
    rows.push({
      set: `${set}:max`,
      created_at: await lastAppliedAt(pool, table),
      tag: null,
      class: null,
      removes: null,
    });
    const newer = await pool.query<{ created_at: string | number }>(
      `SELECT created_at FROM ${table} WHERE created_at > $1 ORDER BY created_at`,
      [since],
    );
    for (const r of newer.rows)
      rows.push({ set, created_at: r.created_at, tag: null, class: null, removes: null });
  }
  return rows;
}

/** The schema is behind this release, or a contract removed what it needs: it must not serve. */
export class SchemaIncompatible extends Error {
  override name = 'SchemaIncompatible';
  constructor(readonly verdict: Extract<SchemaVerdict, { status: 'behind' | 'contracted' }>) {
    super(describeVerdict(verdict));
  }
}

/** The verdict, or SchemaIncompatible where this release must not serve; a schema ahead is logged. */
export async function requireServableSchema(
  pool: DatabasePool,
  app: BundledSchema,
  log: Logger,
): Promise<SchemaVerdict> {
  const verdict = await checkSchema(pool, app);
  if (verdict.status === 'behind' || verdict.status === 'contracted') throw new SchemaIncompatible(verdict);
  if (verdict.status === 'ahead')
    log.info('database schema ahead of this release', { migrations: verdict.migrations });
  return verdict;
}

/** This release as the database records it (releases.ts). */
export function releaseOf(app: BundledSchema, runtime: string, id: string | undefined): Release {
  return {
    id: id ?? `schema-${app.latestMigrationAt}`,
    runtime,
    migrationAt: app.latestMigrationAt,
    needs: [...platformSchemaNeeds, ...(app.needs ?? [])],
  };
}
