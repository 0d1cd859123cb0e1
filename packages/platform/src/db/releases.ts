import { sql } from 'drizzle-orm';
import { errorCode } from '../util/error-chain.js';
import { neededRemovals } from './schema-needs.js';
import type { Database, SqlSession } from './types.js';

// The database's record of the releases that run on it (platform_releases, a platform migration):
// each process boot and each Worker isolate writes its release, the newest app migration it bundles and
// every column it reads or writes, and refreshes when it was last seen. A contract migration consults it
// before removing anything (DESIGN.md §4: "the database's record of running releases says when").

/** A release seen within this window counts as running: a day covers a Workers gradual deployment. */
export const DEFAULT_RELEASE_WINDOW_MS = 24 * 3600_000;
/** How often a running instance refreshes its row: well inside the window. */
export const RELEASE_SEEN_EVERY_MS = 5 * 60_000;
/** Rows not seen for this long are deleted when migrations run. */
const RELEASE_EXPIRY_DAYS = 30;

/** A release as the database records it. */
export interface Release {
  /** RELEASE_ID, a Worker's version id, or `schema-<newest migration>`: builds alike in schema are alike here. */
  id: string;
  runtime: string;
  /** The newest app migration it bundles. */
  migrationAt: number;
  /** Every column it reads or writes (schema-needs.ts). */
  needs: readonly string[];
}

/** One statement, so it runs over every driver (Neon's HTTP one included). */
export async function recordRelease(db: Database, release: Release): Promise<void> {
  await db.execute(sql`
    INSERT INTO platform_releases (release_id, runtime, migration_at, needs)
    VALUES (${release.id}, ${release.runtime}, ${release.migrationAt}, ${JSON.stringify(release.needs)}::jsonb)
    ON CONFLICT (release_id) DO UPDATE SET last_seen_at = now(), runtime = excluded.runtime`);
}

/** A release seen within the window, and which of a contract's removals it needs. */
export interface RunningRelease {
  id: string;
  runtime: string;
  lastSeenMsAgo: number;
  /** What of the contract's removals it needs. */
  needs: string[];
}

/** The releases seen within the window that need any of `removes` (unknown removals: every release). */
export async function releasesNeeding(
  session: SqlSession,
  removes: readonly string[] | undefined,
  windowMs: number,
): Promise<RunningRelease[]> {
  let rows: { release_id: string; runtime: string; ago_ms: string | number; needs: unknown }[];
  try {
    ({ rows } = await session.query(
      `SELECT release_id, runtime, (extract(epoch FROM now() - last_seen_at) * 1000)::bigint AS ago_ms, needs
         FROM platform_releases
        WHERE last_seen_at > now() - make_interval(secs => $1::double precision / 1000)
        ORDER BY last_seen_at DESC`,
      [windowMs],
    ));
  } catch (err) {
    // A database no release of ours has recorded itself on yet.
    if (errorCode(err) === '42P01') return [];
    throw err;
  }
  return rows.flatMap((row) => {
    const needs = (typeof row.needs === 'string' ? JSON.parse(row.needs) : row.needs) as string[];
    const hit =
      removes === undefined ? ['(anything: the migration has no class)'] : neededRemovals(removes, needs);
    return hit.length === 0
      ? []
      : [{ id: row.release_id, runtime: row.runtime, lastSeenMsAgo: Number(row.ago_ms), needs: hit }];
  });
}

/** A contract migration refused because a running release needs what it removes. */
export class ContractRefused extends Error {
  override name = 'ContractRefused';
  constructor(
    readonly migration: string,
    readonly releases: readonly RunningRelease[],
    windowMs: number,
  ) {
    const r = releases[0] as RunningRelease;
    const others = releases.length > 1 ? ` and ${releases.length - 1} more` : '';
    super(
      `refusing contract migration ${migration}: release ${r.id} (${r.runtime}, seen ${Math.round(r.lastSeenMsAgo / 1000)} s ago) needs ${r.needs.join(', ')}${others}; apply it once no such release has been seen for ${Math.round(windowMs / 60_000)} min (RELEASE_WINDOW_MS), or with db:migrate --allow-contract`,
    );
  }
}

/** Throws ContractRefused when a release seen within the window needs what the migration removes. */
export async function refuseContractWhileNeeded(
  session: SqlSession,
  migration: string,
  removes: readonly string[] | undefined,
  windowMs = DEFAULT_RELEASE_WINDOW_MS,
): Promise<void> {
  if (removes !== undefined && removes.length === 0) return;
  const releases = await releasesNeeding(session, removes, windowMs);
  if (releases.length > 0) throw new ContractRefused(migration, releases, windowMs);
}

/** Deletes releases not seen for a month: run with migrations, not on any request path. */
export async function expireReleases(session: SqlSession): Promise<number> {
  try {
    const { rows } = await session.query<{ n: string | number }>(
      `WITH gone AS (DELETE FROM platform_releases WHERE last_seen_at < now() - interval '${RELEASE_EXPIRY_DAYS} days' RETURNING 1)
       SELECT count(*) AS n FROM gone`,
    );
    return Number(rows[0]?.n ?? 0);
  } catch (err) {
    if (errorCode(err) === '42P01') return 0;
    throw err;
  }
}
