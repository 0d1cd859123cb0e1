import { array, type infer as Infer, iso, strictObject, string, type ZodError } from 'zod';
import type { FieldError } from '../errors.js';

// The invoice a client submits. Amounts are decimal strings (never floats: 0.1 + 0.2 is not money),
// dates are calendar dates, and unknown fields are rejected rather than silently dropped.

const MAX_LINE_ITEMS = 500;

const decimal = string().regex(
  /^(0|[1-9]\d{0,12})(\.\d{1,4})?$/,
  'must be a non-negative decimal string, e.g. "12.50"',
);

const text = (max: number) =>
  string()
    .min(1, 'must not be empty')
    .max(max, `must be at most ${max} characters`)
    // Control characters break Xero's validation and terminals, and Postgres text cannot hold NUL;
    // tabs and newlines are fine.
    .refine((s) => !hasControlCharacter(s), 'must not contain control characters');

export function hasControlCharacter(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) || c === 0x7f) return true;
  }
  return false;
}

const calendarDate = iso.date({ error: 'must be a date as YYYY-MM-DD' });

export const lineItemInput = strictObject({
  description: text(4000),
  quantity: decimal,
  unitAmount: decimal,
  accountCode: text(10).optional(),
});

export const invoiceInput = strictObject({
  contact: strictObject({ name: text(255) }),
  lineItems: array(lineItemInput)
    .min(1, 'must have at least one line item')
    .max(MAX_LINE_ITEMS, `must have at most ${MAX_LINE_ITEMS} line items`),
  date: calendarDate,
  dueDate: calendarDate.optional(),
  currency: string().regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as "NZD"'),
  reference: text(255).optional(),
}).refine((i) => i.dueDate === undefined || i.dueDate >= i.date, {
  message: 'must not be before date',
  path: ['dueDate'],
});

export type InvoiceInput = Infer<typeof invoiceInput>;

export function fieldErrors(error: ZodError): FieldError[] {
  return error.issues.map((issue) => {
    const path = issue.path.map(String).join('.') || '(body)';
    if (issue.code === 'unrecognized_keys') {
      return {
        path: [...issue.path.map(String), issue.keys.join(',')].filter(Boolean).join('.'),
        message: 'unknown field',
      };
    }
    return { path, message: issue.message };
  });
}

/** Idempotency-Key: 1 to 128 visible ASCII characters (no spaces or control characters). */
export const idempotencyKey = string().regex(/^[\x21-\x7e]{1,128}$/);
