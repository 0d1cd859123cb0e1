import { and, eq, gt, lt, sql } from 'drizzle-orm';
import { encodeBase64Url } from '../../platform/base64.js';
import { interval } from '../../platform/db/interval.js';
import type { Database } from '../../platform/db/types.js';
import { hashApiKey } from '../api-keys.js';
import { oauthStates } from '../schema.js';

const STATE_TTL_MS = 10 * 60_000;

/** An unguessable state bound to the organization; only its hash is stored. */
export async function issueState(db: Database, organizationId: string): Promise<string> {
  const state = encodeBase64Url(crypto.getRandomValues(new Uint8Array(32)));
  // Expired states are swept as new ones are issued: no separate job for a table this small.
  await db.delete(oauthStates).where(lt(oauthStates.expiresAt, sql`now()`));
  await db.insert(oauthStates).values({
    stateHash: hashApiKey(state),
    organizationId,
    expiresAt: sql`now() + ${interval(STATE_TTL_MS)}`,
  });
  return state;
}

/** Single use: the DELETE consumes it, so a replayed or expired state finds nothing. */
export async function consumeState(db: Database, state: string): Promise<string | undefined> {
  const [row] = await db
    .delete(oauthStates)
    .where(and(eq(oauthStates.stateHash, hashApiKey(state)), gt(oauthStates.expiresAt, sql`now()`)))
    .returning({ organizationId: oauthStates.organizationId });
  return row?.organizationId;
}
