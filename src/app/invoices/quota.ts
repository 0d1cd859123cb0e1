import type { Database } from '@honest-health/platform';
import { countPending } from './store.js';

/** How old a count may be before the next POST counts again. */
export const QUOTA_RECOUNT_MS = 5000;
const MAX_ORGANIZATIONS = 10_000;

/** Which bound a new invoice would cross, if any. */
export type QuotaVerdict = 'ok' | 'count' | 'bytes';

type Count = (
  db: Database,
  organizationId: string,
  cap: number,
) => Promise<{ pending: number; bytes: number }>;

interface Entry {
  pending: number;
  bytes: number;
  /** When the count was taken, or when a recount of it began. */
  at: number;
}

/**
 * ORG_MAX_PENDING_INVOICES and ORG_MAX_PENDING_BYTES: how many unfinished pushes (queued, failed,
 * awaiting_connection), and how many bytes of their invoices, one organization may hold; pushed and
 * dead ones are history and do not count. The count is a bounded query (LIMIT the quota, on a partial
 * index) run at most every QUOTA_RECOUNT_MS per organization per process, plus what this process
 * accepted since: exact within a process, and across N replicas an organization can overshoot by what
 * the others accept within that window.
 *
 * One request recounts a stale entry and the others go on with the old figure meanwhile: were every
 * request that finds it stale to recount, a busy organization's count would run once per request in
 * flight, each scanning up to the quota's rows. The recounting request awaits its own query, so no
 * request waits on I/O another one started (which a Workers isolate does not allow).
 */
export class PendingInvoiceQuota {
  readonly max: number;
  readonly maxBytes: number;
  readonly #count: Count;
  #counts = new Map<string, Entry>();

  constructor(max: number, maxBytes = Number.MAX_SAFE_INTEGER, count: Count = countPending) {
    this.max = max;
    this.maxBytes = maxBytes;
    this.#count = count;
  }

  async admits(db: Database, organizationId: string, bytes = 0, now = Date.now()): Promise<QuotaVerdict> {
    let entry = this.#counts.get(organizationId);
    if (!entry) {
      entry = { ...(await this.#count(db, organizationId, this.max)), at: now };
      this.#remember(organizationId, entry);
    } else if (now - entry.at > (this.#full(entry) ? 1000 : QUOTA_RECOUNT_MS)) {
      // A refusal counts again once a second at most: pushes finishing make room without waiting 5 s.
      const before = entry.at;
      entry.at = now;
      try {
        const fresh = await this.#count(db, organizationId, this.max);
        entry.pending = fresh.pending;
        entry.bytes = fresh.bytes;
        this.#remember(organizationId, entry);
      } catch (err) {
        // The next request tries again rather than trust the old figure for another window.
        entry.at = before;
        throw err;
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

  #full(entry: Entry): boolean {
    return entry.pending >= this.max || entry.bytes >= this.maxBytes;
  }

  #remember(organizationId: string, entry: Entry): void {
    this.#counts.delete(organizationId);
    this.#counts.set(organizationId, entry);
    if (this.#counts.size > MAX_ORGANIZATIONS) {
      const oldest = this.#counts.keys().next().value;
      if (oldest !== undefined) this.#counts.delete(oldest);
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
