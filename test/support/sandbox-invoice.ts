type Json = Record<string, unknown>;

/** An invoice as a client sends it to the Xero sandbox's PUT /Invoices (Xero's field names). */
export function sandboxInvoice(overrides: Json = {}): Json {
  return {
    Type: 'ACCREC',
    Contact: { Name: 'Acme Ltd' },
    Date: '2024-05-01',
    DueDate: '2024-05-31',
    Reference: 'PO-1001',
    LineItems: [
      { Description: 'Widgets', Quantity: 3, UnitAmount: 12.5, AccountCode: '200' },
      { Description: 'Delivery', Quantity: 1, UnitAmount: 9.99, AccountCode: '260' },
    ],
    ...overrides,
  };
}
