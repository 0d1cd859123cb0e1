// Connect links and the OAuth state of the connect flow (src/app/connections/connect-links.ts,
// oauth-state.ts) on the embedded database: unguessable, single use, expiring, bound to one browser,
// carrying a sealed PKCE verifier, and stored only as hashes.

import type { SecretBox } from '@honest-health/platform/crypto';
import { sha256Hex } from '@honest-health/platform/crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_PENDING_FLOWS,
  mintLink,
  sweepExpiredFlows,
} from '../../src/app/connections/connect-links.js';
import {
  consumeState,
  randomToken,
  s256Challenge,
  startFlow,
} from '../../src/app/connections/oauth-state.js';
import { createOrganization } from '../../src/app/organizations.js';
import { type InProcessApp, startInProcess } from '../support/in-process.js';
import { testBox } from '../support/ticks.js';

let app: InProcessApp;
let box: SecretBox;
beforeAll(async () => {
  app = await startInProcess();
  box = await testBox();
});
afterAll(async () => {
  await app?.close();
});

const query = async <T>(text: string, values: unknown[] = []) =>
  (await app.database.pool.query(text, values)).rows as T[];

async function link(orgId: string): Promise<string> {
  const minted = await mintLink(app.database.db, orgId);
  if (minted.kind !== 'ok') throw new Error('no link');
  return minted.token;
}

describe('connect links', () => {
  it('are 32 random bytes, stored as a hash, expire after ten minutes, and open once', async () => {
    const org = await createOrganization(app.database.db, 'Link Ltd');
    const minted = await mintLink(app.database.db, org.id);
    if (minted.kind !== 'ok') throw new Error('no link');
    expect(minted.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const [row] = await query<{ link_hash: string; minutes: number }>(
      'SELECT link_hash, round(extract(epoch FROM expires_at - created_at) / 60)::int AS minutes FROM connect_links WHERE organization_id = $1',
      [org.id],
    );
    expect(row).toEqual({ link_hash: sha256Hex(minted.token), minutes: 10 });
    expect(JSON.stringify(await query('SELECT * FROM connect_links'))).not.toContain(minted.token);

    const first = await startFlow(app.database.db, box, { link: minted.token, browser: randomToken() });
    expect(first?.organizationId).toBe(org.id);
    expect(
      await startFlow(app.database.db, box, { link: minted.token, browser: randomToken() }),
    ).toBeUndefined();
    expect(
      await startFlow(app.database.db, box, { link: 'made-up', browser: randomToken() }),
    ).toBeUndefined();
  });

  it('do not open once expired', async () => {
    const org = await createOrganization(app.database.db, 'Stale Link Ltd');
    const token = await link(org.id);
    await query("UPDATE connect_links SET expires_at = now() - interval '1 second' WHERE link_hash = $1", [
      sha256Hex(token),
    ]);
    expect(await startFlow(app.database.db, box, { link: token, browser: randomToken() })).toBeUndefined();
  });

  it(`are bounded: at most ${DEFAULT_MAX_PENDING_FLOWS} unopened ones per organization`, async () => {
    const org = await createOrganization(app.database.db, 'Many Links Ltd');
    for (let i = 0; i < DEFAULT_MAX_PENDING_FLOWS; i++) await link(org.id);
    expect((await mintLink(app.database.db, org.id)).kind).toBe('too_many');
    const other = await createOrganization(app.database.db, 'Other Links Ltd');
    expect((await mintLink(app.database.db, other.id)).kind).toBe('ok');
  });

  it('count opened flows waiting for Xero too: opening links never makes room for more', async () => {
    const org = await createOrganization(app.database.db, 'Opened Links Ltd');
    const quota = 3;
    for (let i = 0; i < quota; i++) {
      const minted = await mintLink(app.database.db, org.id, quota);
      if (minted.kind !== 'ok') throw new Error(`link ${i} refused`);
      // Opened: the link is consumed and an oauth_states row waits for the callback instead.
      expect(
        await startFlow(app.database.db, box, { link: minted.token, browser: randomToken() }),
      ).toBeDefined();
    }
    expect((await mintLink(app.database.db, org.id, quota)).kind).toBe('too_many');
    await query(
      "UPDATE oauth_states SET expires_at = now() - interval '1 second' WHERE organization_id = $1",
      [org.id],
    );
    expect((await mintLink(app.database.db, org.id, quota)).kind).toBe('ok');
  });
});

describe('OAuth state', () => {
  it('is bound to the browser that opened the link, and consumed once, only by that browser', async () => {
    const org = await createOrganization(app.database.db, 'State Ltd');
    const browser = randomToken();
    const flow = await startFlow(app.database.db, box, { link: await link(org.id), browser });
    if (!flow) throw new Error('no flow');
    expect(flow.state).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const db = app.database.db;
    // Another browser, or none: refused, and the owner's flow is not spent.
    expect(await consumeState(db, box, { state: flow.state, browser: randomToken() })).toEqual({
      kind: 'other_browser',
    });
    expect(await consumeState(db, box, { state: flow.state, browser: undefined })).toEqual({
      kind: 'other_browser',
    });
    const consumed = await consumeState(db, box, { state: flow.state, browser });
    expect(consumed).toMatchObject({ kind: 'ok', organizationId: org.id, organizationName: 'State Ltd' });
    // The verifier is the one the challenge was made from (RFC 7636 S256).
    if (consumed.kind !== 'ok') throw new Error('not consumed');
    expect(consumed.codeVerifier).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await s256Challenge(consumed.codeVerifier)).toBe(flow.codeChallenge);
    expect(await consumeState(db, box, { state: flow.state, browser })).toEqual({ kind: 'unknown' });
    expect(await consumeState(db, box, { state: 'made-up-state', browser })).toEqual({ kind: 'unknown' });
  });

  it('keeps only hashes and a sealed verifier', async () => {
    const org = await createOrganization(app.database.db, 'Hash Ltd');
    const browser = randomToken();
    const flow = await startFlow(app.database.db, box, { link: await link(org.id), browser });
    if (!flow) throw new Error('no flow');
    const [row] = await query<Record<string, string>>('SELECT * FROM oauth_states WHERE state_hash = $1', [
      sha256Hex(flow.state),
    ]);
    expect(row?.browser_hash).toBe(sha256Hex(browser));
    const consumed = await consumeState(app.database.db, box, { state: flow.state, browser });
    if (consumed.kind !== 'ok') throw new Error('not consumed');
    const stored = JSON.stringify(row);
    for (const secret of [flow.state, browser, consumed.codeVerifier]) expect(stored).not.toContain(secret);
  });

  it('expires after ten minutes, expired states are swept, and a state without a binding is refused', async () => {
    const org = await createOrganization(app.database.db, 'Expiry Ltd');
    const browser = randomToken();
    const flow = await startFlow(app.database.db, box, { link: await link(org.id), browser });
    if (!flow) throw new Error('no flow');
    const [ttl] = await query<{ minutes: number }>(
      'SELECT round(extract(epoch FROM expires_at - created_at) / 60)::int AS minutes FROM oauth_states WHERE state_hash = $1',
      [sha256Hex(flow.state)],
    );
    expect(ttl?.minutes).toBe(10);
    await query("UPDATE oauth_states SET expires_at = now() - interval '1 second' WHERE state_hash = $1", [
      sha256Hex(flow.state),
    ]);
    expect(await consumeState(app.database.db, box, { state: flow.state, browser })).toEqual({
      kind: 'unknown',
    });
    // Swept by the tick, not by the next flow (a request never pays for it).
    await startFlow(app.database.db, box, { link: await link(org.id), browser: randomToken() });
    expect(
      (await query<{ state_hash: string }>('SELECT state_hash FROM oauth_states')).map((r) => r.state_hash),
    ).toContain(sha256Hex(flow.state));
    expect((await sweepExpiredFlows(app.database.db)).states).toBeGreaterThanOrEqual(1);
    expect(
      (await query<{ state_hash: string }>('SELECT state_hash FROM oauth_states')).map((r) => r.state_hash),
    ).not.toContain(sha256Hex(flow.state));

    // A row the previous release wrote (no browser, no verifier) cannot complete a flow here.
    const legacy = randomToken();
    await query(
      "INSERT INTO oauth_states (state_hash, organization_id, expires_at) VALUES ($1, $2, now() + interval '5 minutes')",
      [sha256Hex(legacy), org.id],
    );
    expect(await consumeState(app.database.db, box, { state: legacy, browser })).toEqual({ kind: 'unknown' });
  });
});
