import { hotSchema } from '@honest-health/platform';
import {
  array,
  type core,
  type infer as Infer,
  iso,
  maxLength,
  minLength,
  optional,
  refine,
  regex,
  strictObject,
  string,
} from 'zod/mini';
import type { FieldError } from '../errors.js';

// The invoice a client submits. Amounts are decimal strings (never floats: 0.1 + 0.2 is not money),
// dates are calendar dates, and unknown fields are rejected rather than silently dropped.

const MAX_LINE_ITEMS = 500;

/**
 * Decimal limits, stated in the message (docs/xero.md): at most 4 decimal places, because Xero keeps
 * four for UnitAmount only with unitdp=4 (which the client always sends) and rounds anything finer
 * silently; at most 11 digits before the point, so every amount (at most 15 significant digits) is
 * exactly the JSON number Xero's `type: number, format: double` carries.
 */
export const DECIMAL_LIMITS = { integerDigits: 11, places: 4 } as const;
const decimal = string().check(
  regex(
    /^(0|[1-9]\d{0,10})(\.\d{1,4})?$/,
    `must be a non-negative decimal string with at most ${DECIMAL_LIMITS.integerDigits} digits before the point and ${DECIMAL_LIMITS.places} after it, e.g. "12.50"`,
  ),
);

/**
 * ISO 4217 codes as the runtime knows them: Intl.supportedValuesOf is web standard (ECMA-402) and
 * present on Node, Bun and workerd. Read once, at first use.
 */
let currencies: ReadonlySet<string> | undefined;
export function isCurrencyCode(code: string): boolean {
  currencies ??= new Set(Intl.supportedValuesOf('currency'));
  return currencies.has(code);
}

const text = (max: number) =>
  string().check(
    minLength(1, 'must not be empty'),
    maxLength(max, `must be at most ${max} characters`),
    // Control characters break Xero's validation and terminals, and Postgres text cannot hold NUL;
    // tabs and newlines are fine.
    refine((s) => !hasControlCharacter(s), 'must not contain control characters'),
    // JSON text may carry a lone surrogate ("\ud800") and JSON.parse accepts it, but it is no
    // character: Postgres refuses it in jsonb (22P02) and Xero could not store it either.
    refine(isWellFormed, 'must be well-formed Unicode (no lone surrogates)'),
  );

// String.prototype.isWellFormed (ES2024) is in Node 20+, Bun and workerd; TypeScript's ES2023 lib
// does not declare it yet.
export const isWellFormed = (s: string): boolean =>
  (s as string & { isWellFormed(): boolean }).isWellFormed();

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
  accountCode: optional(text(10)),
});

// Every POST parses one: compiled where the runtime allows (hotSchema).
export const invoiceInput = hotSchema(
  strictObject({
    // Xero rejects a contact without a name; blank after trimming is no name (and Xero trims).
    contact: strictObject({
      name: text(255).check(refine((n) => n.trim() !== '', 'must not be blank')),
    }),
    lineItems: array(lineItemInput).check(
      minLength(1, 'must have at least one line item'),
      maxLength(MAX_LINE_ITEMS, `must have at most ${MAX_LINE_ITEMS} line items`),
    ),
    date: calendarDate,
    dueDate: optional(calendarDate),
    currency: string().check(
      refine(
        (c) => /^[A-Z]{3}$/.test(c) && isCurrencyCode(c),
        'must be an ISO 4217 currency code such as "NZD"',
      ),
    ),
    reference: optional(text(255)),
    // The Xero tenant (GET /api/connections `tenantId`) to send this invoice to; it must be a connection
    // the organization chose. Without it, the organization's default connection. Xero's tenant ids are
    // UUIDs (xero-identity.yaml, Connection.tenantId `format: uuid`); any case is accepted.
    tenantId: optional(
      string().check(
        regex(
          /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i,
          'must be a Xero tenant id (a UUID)',
        ),
      ),
    ),
  }).check(
    refine((i) => i.dueDate === undefined || i.dueDate >= i.date, {
      message: 'must not be before date',
      path: ['dueDate'],
    }),
  ),
);

export type InvoiceInput = Infer<typeof invoiceInput>;

export function fieldErrors(error: core.$ZodError): FieldError[] {
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
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,128}$/;
