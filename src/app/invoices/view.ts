import type { PushRow } from './store.js';

/** What the API shows of a push: never the request hash or lease internals. */
export function pushView(row: PushRow) {
  return { ...listItemView(row), invoice: row.payload, links: { self: `/api/invoices/${row.id}` } };
}

/** What POST answers: the id, status and where to read it, never the invoice it carried. */
export function acceptedView(row: Omit<PushRow, 'payload'>) {
  return {
    ...listItemView(row),
    links: { self: `/api/invoices/${row.id}` },
  };
}

/**
 * A list item: the push without its invoice (up to 1 MiB each), fetched one at a time from
 * GET /api/invoices/{id}. Every field left is bounded (lastError to about 1000 characters), so a page of
 * MAX_PAGE items stays under LIST_PAGE_MAX_BYTES however large the invoices. Times are their JSON text
 * already (what JSON.stringify makes of a Date, by the same toJSON): an object with a Date in it
 * takes V8's slower general path through JSON.stringify.
 */
export function listItemView(row: Omit<PushRow, 'payload'>) {
  const createdAt = row.createdAt.toJSON();
  return {
    id: row.id,
    status: row.status,
    idempotencyKey: row.idempotencyKey,
    attempts: row.attempts,
    nextAttemptAt: row.status === 'queued' || row.status === 'failed' ? row.nextAttemptAt.toJSON() : null,
    lastError: row.lastError,
    xeroInvoiceId: row.xeroInvoiceId,
    // The Xero tenant it goes to (null: it waits for the organization's default connection).
    tenantId: row.tenantId,
    createdAt,
    updatedAt: row.updatedAt === row.createdAt ? createdAt : row.updatedAt.toJSON(),
  };
}

export function encodeCursor(row: Pick<PushRow, 'cursorAt' | 'id'>): string {
  return btoa(JSON.stringify([row.cursorAt, row.id])).replace(/=+$/, '');
}

export function decodeCursor(cursor: string): { at: string; id: string } | undefined {
  try {
    const [at, id] = JSON.parse(atob(cursor)) as unknown[];
    if (typeof at !== 'string' || typeof id !== 'string') return undefined;
    // Validated here, not by Postgres: a cast error there would be a 500 for a bad query string.
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)) return undefined;
    return isPossibleTime(at) ? { at, id } : undefined;
  } catch {
    return undefined;
  }
}

const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.\d{1,6})?[+-](\d{2})(?::(\d{2}))?$/;

// Postgres's text form of a timestamptz, and a time that exists: a well-formed impossible one (month
// 13, 31 April) would fail the cast there with 22008, answered 422 when it is a bad query string (400).
function isPossibleTime(at: string): boolean {
  const m = TIMESTAMP.exec(at);
  if (!m) return false;
  const n = (i: number) => Number(m[i] ?? 0);
  const [year, month, day] = [n(1), n(2), n(3)];
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] ?? 0;
  return day >= 1 && day <= days && n(4) <= 23 && n(5) <= 59 && n(6) <= 59 && n(7) <= 15 && n(8) <= 59;
}
