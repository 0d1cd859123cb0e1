import { validate } from '@honest-health/platform';
import { describe, expect, it } from 'vitest';
import { loadAppConfig } from '../../src/app/config.js';
import { fieldErrors, invoiceInput } from '../../src/app/invoices/input.js';

// The schemas are zod/mini, which has no messages of its own ("Invalid input"): these pin the
// messages clients and operators saw with classic zod. No other module is imported that could load
// classic zod's English locale for us.

const invoice = {
  contact: { name: 'Acme' },
  lineItems: [{ description: 'Widget', quantity: '2', unitAmount: '12.50' }],
  date: '2026-01-31',
  currency: 'NZD',
};

describe('validation messages', () => {
  it("keep zod's English wording for a wrong type or a missing field", () => {
    const parsed = validate(invoiceInput, {
      ...invoice,
      lineItems: [{ description: 'Widget', quantity: 2, unitAmount: '12.50' }],
      contact: {},
      surplus: true,
    });
    expect(parsed.success).toBe(false);
    expect(fieldErrors(parsed.error as NonNullable<typeof parsed.error>)).toEqual([
      { path: 'contact.name', message: 'Invalid input: expected string, received undefined' },
      { path: 'lineItems.0.quantity', message: 'Invalid input: expected string, received number' },
      { path: 'surplus', message: 'unknown field' },
    ]);
    expect(validate(invoiceInput, invoice).success).toBe(true);
  });

  it('report a bad number alone, without the cross-field checks, as before', () => {
    // Classic zod's transform aborted the object's refinements; the one-line boot error kept that shape.
    expect(() => loadAppConfig({ XERO_TIMEOUT_MS: 'soon', XERO_CLIENT_ID: 'id' })).toThrow(
      /^invalid configuration: XERO_TIMEOUT_MS must be an integer from 100 to 120000$/,
    );
    expect(() => loadAppConfig({ XERO_CLIENT_ID: 'id' })).toThrow(
      /^invalid configuration: XERO_CLIENT_SECRET must be set together with XERO_CLIENT_ID$/,
    );
  });
});
