// The pending-invoice quota's recount (src/app/invoices/quota.ts) against the real count on PGlite.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PendingInvoiceQuota, QUOTA_RECOUNT_MS } from '../../src/app/invoices/quota.js';
import { countPending } from '../../src/app/invoices/store.js';
import { createOrganization } from '../../src/app/organizations.js';
import { type InProcessApp, startInProcess } from '../support/in-process.js';

let app: InProcessApp;
beforeAll(async () => {
  app = await startInProcess();
});
afterAll(async () => {
  await app?.close();
});

describe('PendingInvoiceQuota', () => {
  it('a stale count is recounted by one request while the others in flight go on with the old figure', async () => {
    const db = app.database.db;
    const org = await createOrganization(db, 'Busy Ltd');
    let counts = 0;
    const quota = new PendingInvoiceQuota(1000, Number.MAX_SAFE_INTEGER, (...args) => {
      counts += 1;
      return countPending(...args);
    });
    const t0 = 1_000_000;
    expect(await quota.admits(db, org.id, 0, t0)).toBe('ok');
    expect(counts).toBe(1);
    // Fifty requests at once, all finding the count stale: one query, not fifty.
    const stale = t0 + QUOTA_RECOUNT_MS + 1;
    const verdicts = await Promise.all(Array.from({ length: 50 }, () => quota.admits(db, org.id, 0, stale)));
    expect(verdicts.every((v) => v === 'ok')).toBe(true);
    expect(counts).toBe(2);
  });

  it('a recount that failed is tried again by the next request', async () => {
    const db = app.database.db;
    const org = await createOrganization(db, 'Flaky Ltd');
    let calls = 0;
    const quota = new PendingInvoiceQuota(1000, Number.MAX_SAFE_INTEGER, (...args) => {
      calls += 1;
      if (calls === 2) return Promise.reject(new Error('connection lost'));
      return countPending(...args);
    });
    const t0 = 1_000_000;
    await quota.admits(db, org.id, 0, t0);
    const stale = t0 + QUOTA_RECOUNT_MS + 1;
    await expect(quota.admits(db, org.id, 0, stale)).rejects.toThrow('connection lost');
    expect(await quota.admits(db, org.id, 0, stale + 1)).toBe('ok');
    expect(calls).toBe(3);
  });
});
