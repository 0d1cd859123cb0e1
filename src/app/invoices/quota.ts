import type { Database } from '@honest-health/platform';
import { countPending } from './store.js';

/** How old a count may be before the next POST counts again. */
export const QUOTA_RECOUNT_MS = 5000;
const MAX_ORGANIZATIONS = 10_000;

/**
 * ORG_MAX_PENDING_INVOICES: how many unfinished pushes (queued, failed, awaiting_connection) one
 * organization may hold; pushed and dead ones are history and do not count. The count is a bounded
 * query (LIMIT the quota, on a partial index) run at most every QUOTA_RECOUNT_MS per organization per
 * process, plus what this process accepted since: exact within a process, and across N replicas an
 * organization can overshoot by what the others accept within that window.
 */
export class PendingInvoiceQuota {
  readonly max: number;
  #counts = new Map<string, { pending: number; at: number }>();

  constructor(max: number) {
    this.max = max;
  }

  async admits(db: Database, organizationId: string, now = Date.now()): Promise<boolean> {
    let entry = this.#counts.get(organizationId);
    // A refusal counts again once a second at most: pushes finishing make room without waiting 5 s.
    const stale = entry && now - entry.at > (entry.pending >= this.max ? 1000 : QUOTA_RECOUNT_MS);
    if (!entry || stale) {
      entry = { pending: await countPending(db, organizationId, this.max), at: now };
      this.#counts.delete(organizationId);
      this.#counts.set(organizationId, entry);
      if (this.#counts.size > MAX_ORGANIZATIONS) {
        const oldest = this.#counts.keys().next().value;
        if (oldest !== undefined) this.#counts.delete(oldest);
      }
    }
    return entry.pending < this.max;
  }

  /** A push this process just created. */
  added(organizationId: string): void {
    const entry = this.#counts.get(organizationId);
    if (entry) entry.pending += 1;
  }
}
