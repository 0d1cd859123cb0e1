// The OAuth state of the connect flow (src/app/connections/oauth-state.ts) on the embedded database:
// unguessable, bound to its organization, single use, expiring, and stored only as a hash.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../src/app/api-keys.js';
import { consumeState, issueState } from '../../src/app/connections/oauth-state.js';
import { createOrganization } from '../../src/app/organizations.js';
import { type InProcessApp, startInProcess } from '../support/in-process.js';

let app: InProcessApp;
beforeAll(async () => {
  app = await startInProcess();
});
afterAll(async () => {
  await app?.close();
});

const rows = async () =>
  (
    await app.database.pool.query<{ state_hash: string; organization_id: string }>(
      'SELECT * FROM oauth_states',
    )
  ).rows;

describe('OAuth state', () => {
  it('is 32 random bytes, base64url, and names its organization once: a replay finds nothing', async () => {
    const org = await createOrganization(app.database.db, 'State Ltd');
    const state = await issueState(app.database.db, org.id);
    expect(state).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await issueState(app.database.db, org.id)).not.toBe(state);
    expect(await consumeState(app.database.db, state)).toBe(org.id);
    expect(await consumeState(app.database.db, state)).toBeUndefined();
    expect(await consumeState(app.database.db, 'made-up-state')).toBeUndefined();
  });

  it('keeps only its hash', async () => {
    const org = await createOrganization(app.database.db, 'Hash Ltd');
    const state = await issueState(app.database.db, org.id);
    const stored = (await rows()).filter((r) => r.organization_id === org.id);
    expect(stored.map((r) => r.state_hash)).toContain(hashApiKey(state));
    expect(JSON.stringify(await rows())).not.toContain(state);
  });

  it('expires after ten minutes, and expired states are swept when the next is issued', async () => {
    const org = await createOrganization(app.database.db, 'Expiry Ltd');
    const state = await issueState(app.database.db, org.id);
    const { rows: ttl } = await app.database.pool.query<{ minutes: number }>(
      'SELECT round(extract(epoch FROM expires_at - created_at) / 60)::int AS minutes FROM oauth_states WHERE state_hash = $1',
      [hashApiKey(state)],
    );
    expect(ttl[0]?.minutes).toBe(10);
    await app.database.pool.query(
      "UPDATE oauth_states SET expires_at = now() - interval '1 second' WHERE state_hash = $1",
      [hashApiKey(state)],
    );
    expect(await consumeState(app.database.db, state)).toBeUndefined();

    const stale = await issueState(app.database.db, org.id);
    await app.database.pool.query(
      "UPDATE oauth_states SET expires_at = now() - interval '1 second' WHERE state_hash = $1",
      [hashApiKey(stale)],
    );
    await issueState(app.database.db, org.id);
    expect((await rows()).map((r) => r.state_hash)).not.toContain(hashApiKey(stale));
  });
});
