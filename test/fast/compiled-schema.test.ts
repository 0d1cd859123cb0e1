import { useSchemaCompiler, validate } from '@honest-health/platform';
import { describe, expect, it } from 'vitest';
import { compile, safeParse } from 'zod/mini';
import { fieldErrors, invoiceInput } from '../../src/app/invoices/input.js';

// Node and Bun parse the invoice of every POST with zod's compiled fast path (util/validate.ts). It
// must answer exactly as the runtime parser does: the same verdict, the same output (its JSON text is
// the stored payload and what the request hash is over, so even key order counts) and the same errors.

const invoice = {
  contact: { name: 'Harbourside Joinery Ltd' },
  date: '2026-11-29',
  dueDate: '2026-12-20',
  currency: 'NZD',
  reference: 'PO-88412 / site 3',
  lineItems: [
    { description: 'Oak veneer panels', quantity: '12', unitAmount: '184.50', accountCode: '200' },
    { description: 'Installation labour', quantity: '7.5', unitAmount: '95.00' },
  ],
};
const item = invoice.lineItems[1] as Record<string, unknown>;
const withItem = (patch: Record<string, unknown>) => ({ ...invoice, lineItems: [{ ...item, ...patch }] });

const inputs: unknown[] = [
  invoice,
  { ...invoice, tenantId: 'ABCDEF01-2345-6789-abcd-ef0123456789' },
  // Keys in another order than the schema's: the output follows the schema.
  JSON.parse(
    '{"tenantId":"abcdef01-2345-6789-abcd-ef0123456789","reference":"r","currency":"NZD","date":"2028-02-29",' +
      '"lineItems":[{"accountCode":"200","unitAmount":"1","quantity":"2","description":"d"}],"contact":{"name":"n"}}',
  ),
  JSON.parse(
    '{"__proto__":{"x":1},"contact":{"name":"n"},"lineItems":[],"date":"2026-01-01","currency":"NZD"}',
  ),
  { ...invoice, dueDate: '2026-11-28' },
  { ...invoice, date: '2026-02-30' },
  { ...invoice, date: '2026-2-3' },
  { ...invoice, currency: 'nzd' },
  { ...invoice, currency: 'ABC' },
  { ...invoice, contact: { name: '   ' } },
  { ...invoice, contact: { name: 'a', extra: 1 } },
  { ...invoice, contact: 'Acme' },
  { ...invoice, reference: '' },
  { ...invoice, reference: 'x'.repeat(256) },
  { ...invoice, reference: 'tab\tand newline\n' },
  { ...invoice, reference: 'bell\u0007' },
  { ...invoice, reference: 'lone \ud800 surrogate' },
  { ...invoice, tenantId: 'not-a-uuid' },
  { ...invoice, surplus: true },
  { ...invoice, lineItems: [] },
  { ...invoice, lineItems: Array.from({ length: 501 }, () => item) },
  { ...invoice, lineItems: Array.from({ length: 500 }, () => item) },
  { ...invoice, lineItems: 'none' },
  withItem({ quantity: 2 }),
  withItem({ quantity: '01' }),
  withItem({ quantity: '1.23456' }),
  withItem({ unitAmount: '123456789012' }),
  withItem({ unitAmount: '12345678901.1234' }),
  withItem({ accountCode: '12345678901' }),
  withItem({ description: 'x'.repeat(4001) }),
  withItem({ description: 'x'.repeat(4000) }),
  withItem({ description: null }),
  withItem({ surplus: 'y' }),
  { ...invoice, date: undefined },
  null,
  [],
  'invoice',
  42,
];

const outcome = (parsed: ReturnType<typeof safeParse>) =>
  parsed.success
    ? { ok: true, json: JSON.stringify(parsed.data) }
    : { ok: false, errors: fieldErrors(parsed.error) };

describe('the compiled invoice schema', () => {
  it('is modelled whole by the compiler, with no part left to the runtime parser', () => {
    expect(() => compile(invoiceInput, { strict: true })).not.toThrow();
  });

  it('answers every input as the runtime parser does: verdict, output text and errors', () => {
    // Runtime first (validate also installs the English messages), then the compiled schema.
    const runtime = inputs.map((input) => outcome(validate(invoiceInput, input)));
    expect(runtime.filter((r) => r.ok)).toHaveLength(7);
    useSchemaCompiler(compile);
    expect(inputs.map((input) => outcome(validate(invoiceInput, input)))).toEqual(runtime);
    expect(inputs.map((input) => outcome(safeParse(compile(invoiceInput), input)))).toEqual(runtime);
  });
});
