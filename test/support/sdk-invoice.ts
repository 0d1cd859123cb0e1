// Our invoice payload typed through xero-node's generated models, shared by the contract tests
// (test/xero-node-contract.test.ts against the sandbox, test/fast/xero-payload.test.ts without it).
import { CurrencyCode, Invoice, type LineItem } from 'xero-node';
import type { StoredInvoice, XeroInvoicePayload } from '../../src/app/invoices/xero-payload.js';

/** Our payload, typed through xero-node's generated models: a field of the wrong type fails `tsc`. */
export function asSdkInvoice(payload: XeroInvoicePayload): Invoice {
  const lineItems: LineItem[] = payload.LineItems.map((l) => ({
    description: l.Description,
    quantity: l.Quantity,
    unitAmount: l.UnitAmount,
    ...(l.AccountCode === undefined ? {} : { accountCode: l.AccountCode }),
  }));
  return {
    type: Invoice.TypeEnum[payload.Type],
    status: Invoice.StatusEnum[payload.Status],
    contact: { name: payload.Contact.Name },
    lineItems,
    date: payload.Date,
    ...(payload.DueDate === undefined ? {} : { dueDate: payload.DueDate }),
    currencyCode: CurrencyCode[payload.CurrencyCode as keyof typeof CurrencyCode],
    ...(payload.Reference === undefined ? {} : { reference: payload.Reference }),
    ...(payload.Url === undefined ? {} : { url: payload.Url }),
  };
}

export const stored: StoredInvoice = {
  contact: { name: 'Contract Customer' },
  lineItems: [
    { description: 'Four places', quantity: '2.5', unitAmount: '0.1234' },
    { description: 'Plain', quantity: '1', unitAmount: '10.00', accountCode: '200' },
  ],
  date: '2026-11-29',
  dueDate: '2026-12-13',
  currency: 'NZD',
  reference: 'PO-1',
};
