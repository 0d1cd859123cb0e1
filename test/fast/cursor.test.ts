// The list cursor (src/app/invoices/view.ts): an opaque token for "after this row", validated before
// it reaches Postgres, where a cast error would be a 500 for a bad query string.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { PushRow } from '../../src/app/invoices/store.js';
import { decodeCursor, encodeCursor } from '../../src/app/invoices/view.js';

const ID = '0b7e7c8e-2f4a-4c1e-9d3b-5a6f7e8d9c0b';
// Postgres's text form of a timestamptz, as the store reads it (`created_at::text`): microseconds.
const AT = '2026-12-01 10:00:00.123456+00';

const row = (cursorAt: string, id: string) => ({ cursorAt, id }) as PushRow;
const token = (value: unknown) => btoa(JSON.stringify(value)).replace(/=+$/, '');

describe('list cursor', () => {
  it('round-trips the exact creation time and id', () => {
    expect(decodeCursor(encodeCursor(row(AT, ID)))).toEqual({ at: AT, id: ID });
  });

  // Base64 of this JSON never holds `+`, `/` or `=` (the padding is cut): no byte of it is 0x3E, 0x3F,
  // 0x7E or 0x7F, and ASCII's high bit is 0. So a cursor goes into a query string as it is, where
  // Hono would read a `+` as a space.
  it('round-trips every timestamp form Postgres writes and every id, as letters and digits only', () => {
    const pad = (n: number, width: number) => String(n).padStart(width, '0');
    const timestamp = fc
      .record({
        date: fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('9999-12-31T00:00:00Z') }),
        micros: fc.option(fc.integer({ min: 0, max: 999_999 })),
        offset: fc.constantFrom('+00', '-05', '+05:30', '+13'),
      })
      .filter(({ date }) => !Number.isNaN(date.getTime()))
      .map(({ date, micros, offset }) => {
        const iso = date.toISOString();
        // Postgres drops trailing zeros of the fraction, and the fraction when it is zero.
        const digits = micros === null ? '' : pad(micros, 6).replace(/0+$/, '');
        const fraction = digits === '' ? '' : `.${digits}`;
        return `${iso.slice(0, 10)} ${iso.slice(11, 19)}${fraction}${offset}`;
      });
    fc.assert(
      fc.property(timestamp, fc.uuid(), (at, id) => {
        const cursor = encodeCursor(row(at, id));
        expect(cursor).toMatch(/^[A-Za-z0-9]+$/);
        expect(decodeCursor(cursor)).toEqual({ at, id });
      }),
      { numRuns: 300 },
    );
  });

  it('refuses what it did not make: garbage, other JSON, a bad id or time, SQL in either', () => {
    for (const bad of [
      '',
      'not a cursor',
      '%%%',
      token({ at: AT, id: ID }),
      token([AT]),
      token([AT, 42]),
      token([1_764_583_200_000, ID]),
      token([AT, 'not-a-uuid']),
      token([AT, `${ID}' OR '1'='1`]),
      token(['2026-12-01', ID]),
      token(['2026-12-01 10:00:00+00; DROP TABLE invoice_pushes', ID]),
      token(['2026-12-01T10:00:00Z', ID]),
      token(['2026-12-01 10:00:00.1234567+00', ID]),
      // Well formed, but no such time: Postgres would refuse the cast (22008) and the answer be a 422.
      token(['2026-13-01 10:00:00+00', ID]),
      token(['2026-04-31 10:00:00+00', ID]),
      token(['2026-02-29 10:00:00+00', ID]),
      token(['2026-12-00 10:00:00+00', ID]),
      token(['2026-12-01 24:00:00+00', ID]),
      token(['2026-12-01 10:60:00+00', ID]),
      token(['2026-12-01 10:00:60+00', ID]),
      token(['2026-12-01 10:00:00+16', ID]),
      token(['2026-12-01 10:00:00+05:60', ID]),
    ]) {
      expect(decodeCursor(bad), bad).toBeUndefined();
    }
    expect(decodeCursor(token(['2028-02-29 23:59:59.999999-05:30', ID]))).toEqual({
      at: '2028-02-29 23:59:59.999999-05:30',
      id: ID,
    });
  });
});
