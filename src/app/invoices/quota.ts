import type { Database } from '@honest-health/platform';
import { countPending } from './store.js';

/** How old a count may be before the next POST counts again. */
export const QUOTA_RECOUNT_MS = 5000;
const MAX_ORGANIZATIONS = 10_000;

/** Which bound a new invoice would cross, if any. */
export type QuotaVerdict = 'ok' | 'count' | 'bytes';

/**
 * ORG_MAX_PENDING_INVOICES and ORG_MAX_PENDING_BYTES: how many unfinished pushes (queued, failed,
 * awaiting_connection), and how many bytes of their invoices, one organization may hold; pushed and
 * dead ones are history and do not count. The count is a bounded query (LIMIT the quota, on a partial
 * index) run at most every QUOTA_RECOUNT_MS per organization per process, plus what this process
 * accepted since: exact within a process, and across N replicas an organization can overshoot by what
 * the others accept within that window.
 */
export class PendingInvoiceQuota {
  readonly max: number;
  readonly maxBytes: number;
  #counts = new Map<string, { pending: number; bytes: number; at: number }>();

  constructor(max: number, maxBytes = Number.MAX_SAFE_INTEGER) {
    this.max = max;
    this.maxBytes = maxBytes;
  }

  async admits(db: Database, organizationId: string, bytes = 0, now = Date.now()): Promise<QuotaVerdict> {
    let entry = this.#counts.get(organizationId);
    const full = (e: { pending: number; bytes: number }) => e.pending >= this.max || e.bytes >= this.maxBytes;
    // A refusal counts again once a second at most: pushes finishing make room without waiting 5 s.
    const stale = entry && now - entry.at > (full(entry) ? 1000 : QUOTA_RECOUNT_MS);
    if (!entry || stale) {
      entry = { ...(await countPending(db, organizationId, this.max)), at: now };
      this.#counts.delete(organizationId);
      this.#counts.set(organizationId, entry);
      if (this.#counts.size > MAX_ORGANIZATIONS) {
        const oldest = this.#counts.keys().next().value;
        if (oldest !== undefined) this.#counts.delete(oldest);
      }
    }
    if (entry.pending >= this.max) return 'count';
    if (entry.bytes + bytes > this.maxBytes) return 'bytes';
    return 'ok';
  }

  /** A push this process just created, of `bytes` bytes of invoice. */
  added(organizationId: string, bytes = 0): void {
    const entry = this.#counts.get(organizationId);
    if (entry) {
      entry.pending += 1;
      entry.bytes += bytes;
    }
  }
}

/** UTF-8 length of a string, without encoding it (an encoded copy would be another MiB per invoice). */
export function utf8Length(s: string): number {
  let bytes = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c <= 0xdbff) {
      // A surrogate pair: 4 bytes for 2 code units.
      bytes += 1;
      i += 1;
    } else bytes += 2;
  }
  return bytes;
}
