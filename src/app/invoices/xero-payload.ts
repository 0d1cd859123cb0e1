// The invoice-to-Xero mapping: a stored invoice in the shape of Xero's Invoices endpoint.

/** The invoice as ingress stored it (see input.ts): amounts are decimal strings. */
export interface StoredInvoice {
  contact: { name: string };
  lineItems: { description: string; quantity: string; unitAmount: string; accountCode?: string }[];
  date: string;
  dueDate?: string;
  currency: string;
  reference?: string;
}

/** What toXeroInvoice builds; test/xero-node-contract.test.ts checks it against xero-node's models. */
export interface XeroInvoicePayload {
  Type: 'ACCREC';
  Status: 'DRAFT';
  Contact: { Name: string };
  LineItems: { Description: string; Quantity: number; UnitAmount: number; AccountCode?: string }[];
  Date: string;
  DueDate?: string;
  CurrencyCode: string;
  Reference?: string;
  /** The push's marker (xero/client.ts invoiceMarker). */
  Url?: string;
}

/**
 * Our stored invoice, in Xero's shape: a draft sales invoice. Quantity and UnitAmount are JSON numbers
 * (`type: number, format: double` in xero_accounting.yaml, and what xero-node sends); ingress limits
 * them to 15 significant digits, so the decimal string converts to a double and back exactly.
 */
export function toXeroInvoice(input: StoredInvoice, marker?: string): XeroInvoicePayload {
  return {
    Type: 'ACCREC',
    Status: 'DRAFT',
    Contact: { Name: input.contact.name.trim() },
    LineItems: input.lineItems.map((l) => ({
      Description: l.description,
      Quantity: Number(l.quantity),
      UnitAmount: Number(l.unitAmount),
      ...(l.accountCode ? { AccountCode: l.accountCode } : {}),
    })),
    Date: input.date,
    ...(input.dueDate ? { DueDate: input.dueDate } : {}),
    CurrencyCode: input.currency,
    ...(input.reference ? { Reference: input.reference } : {}),
    ...(marker ? { Url: marker } : {}),
  };
}
