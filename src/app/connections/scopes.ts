// Which Xero scopes can create invoices. Apps created on or after 2026-03-02 cannot request the broad
// `accounting.transactions`; they use the granular `accounting.invoices` (older apps keep the broad
// scope until they move, by September 2027), so the default is the granular one and XERO_SCOPES lets
// an older app keep the broad one.

export const DEFAULT_XERO_SCOPES = 'offline_access accounting.invoices';

const INVOICE_WRITE_SCOPES = ['accounting.invoices', 'accounting.transactions'];

/**
 * Why the granted scopes cannot create invoices, or undefined when they can. A token response that
 * states no scope is taken at its word for what was asked (RFC 6749 5.1: scope is optional when it
 * equals the requested one).
 */
export function missingInvoiceScope(granted: string | null | undefined): string | undefined {
  if (granted === null || granted === undefined) return undefined;
  const scopes = granted.split(/\s+/).filter(Boolean);
  if (INVOICE_WRITE_SCOPES.some((s) => scopes.includes(s))) return undefined;
  return `Xero granted "${scopes.join(' ')}", which cannot create invoices: it needs accounting.invoices (or accounting.transactions for apps created before 2026-03-02); set XERO_SCOPES and connect again`;
}
