import type { Database } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import { and, asc, eq, gt, isNull } from 'drizzle-orm';
import { xeroGrants } from '../schema.js';
import { tokenContext } from './grants.js';

export interface ResealCounts {
  /** Rewritten under the current key. */
  resealed: number;
  /** Already under the current key: nothing to do. */
  current: number;
  /** Do not open under any configured key: left exactly as they are. */
  unreadable: number;
  /** Changed by a refresh three times while being resealed: left for the next run. */
  busy: number;
  /** The first few unreadable grants, with why (no secrets). */
  unreadableGrants: { grant: string; reason: string }[];
}

const KEEP_UNREADABLE = 10;

type Row = {
  id: string;
  sealContext: string | null;
  tokenVersion: number;
  accessTokenEnc: string | null;
  refreshTokenEnc: string;
};

const columns = {
  id: xeroGrants.id,
  sealContext: xeroGrants.sealContext,
  tokenVersion: xeroGrants.tokenVersion,
  accessTokenEnc: xeroGrants.accessTokenEnc,
  refreshTokenEnc: xeroGrants.refreshTokenEnc,
};

export const emptyCounts = (): ResealCounts => ({
  resealed: 0,
  current: 0,
  unreadable: 0,
  busy: 0,
  unreadableGrants: [],
});

/**
 * Re-seals every grant's tokens under the box's current key, in batches by id (so a run that stops is
 * resumed by running it again: rows already under the current key are skipped). Each row is written
 * with a compare-and-set on token_version and on the ciphertexts read, so a refresh that saved a newer
 * token meanwhile is never overwritten: the row is read again and retried. The plaintext does not
 * change, so token_version does not either (the push tick's cache stays right). A row that no
 * configured key opens is left as it is and reported: nothing is lost.
 */
export async function resealGrantTokens(
  db: Database,
  box: SecretBox,
  options: { batchSize?: number; afterBatch?: (counts: ResealCounts) => Promise<void> | void } = {},
): Promise<ResealCounts> {
  const batchSize = options.batchSize ?? 100;
  const counts = emptyCounts();
  let after: string | undefined;
  for (;;) {
    const rows = await db
      .select(columns)
      .from(xeroGrants)
      .where(after === undefined ? undefined : gt(xeroGrants.id, after))
      .orderBy(asc(xeroGrants.id))
      .limit(batchSize);
    if (rows.length === 0) break;
    await resealRows(db, box, rows, counts);
    after = rows[rows.length - 1]?.id;
    await options.afterBatch?.(counts);
    if (rows.length < batchSize) break;
  }
  return counts;
}

/** Re-seals these rows (as read, at their token_version) into `counts`. */
export async function resealRows(
  db: Database,
  box: SecretBox,
  rows: readonly Row[],
  counts: ResealCounts = emptyCounts(),
): Promise<ResealCounts> {
  for (const first of rows) {
    let row: Row | undefined = first;
    for (let attempt = 1; row; attempt++) {
      const outcome = await resealRow(db, box, row);
      if (outcome === 'changed') {
        if (attempt === 3) {
          counts.busy += 1;
          break;
        }
        [row] = await db.select(columns).from(xeroGrants).where(eq(xeroGrants.id, row.id));
        continue;
      }
      if (typeof outcome === 'string') counts[outcome] += 1;
      else {
        counts.unreadable += 1;
        if (counts.unreadableGrants.length < KEEP_UNREADABLE)
          counts.unreadableGrants.push({ grant: row.id, reason: outcome.unreadable });
      }
      break;
    }
  }
  return counts;
}

async function resealRow(
  db: Database,
  box: SecretBox,
  row: Row,
): Promise<'resealed' | 'current' | 'changed' | { unreadable: string }> {
  const stale = (sealed: string | null) => sealed !== null && box.needsReseal(sealed);
  if (!stale(row.accessTokenEnc) && !stale(row.refreshTokenEnc)) return 'current';
  let access: string | null;
  let refresh: string;
  try {
    refresh = await box.open(row.refreshTokenEnc, tokenContext(row, 'refresh'));
    access =
      row.accessTokenEnc === null ? null : await box.open(row.accessTokenEnc, tokenContext(row, 'access'));
  } catch (err) {
    return { unreadable: err instanceof Error ? err.message : 'does not open' };
  }
  const written = await db
    .update(xeroGrants)
    .set({
      accessTokenEnc: access === null ? null : await box.seal(access, tokenContext(row, 'access')),
      refreshTokenEnc: await box.seal(refresh, tokenContext(row, 'refresh')),
    })
    .where(
      and(
        eq(xeroGrants.id, row.id),
        eq(xeroGrants.tokenVersion, row.tokenVersion),
        eq(xeroGrants.refreshTokenEnc, row.refreshTokenEnc),
        row.accessTokenEnc === null
          ? isNull(xeroGrants.accessTokenEnc)
          : eq(xeroGrants.accessTokenEnc, row.accessTokenEnc),
        // The seal context the ciphertexts were read under (a refresh replaces a migrated grant's).
        row.sealContext === null
          ? isNull(xeroGrants.sealContext)
          : eq(xeroGrants.sealContext, row.sealContext),
      ),
    )
    .returning({ id: xeroGrants.id });
  return written.length > 0 ? 'resealed' : 'changed';
}
