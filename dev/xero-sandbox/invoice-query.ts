// GET /Invoices filtering: the IDs, InvoiceNumbers, ContactIDs and Statuses parameters, and a small
// subset of Xero's `where` language (Field=="value" and Field!=null terms joined by AND), enough to look
// an invoice up by its Url marker, Reference or number. Strings compare case-insensitively; an absent
// optional field (Url, Reference) is null, so it equals no string.
import type { Invoice } from './invoice-model.js';
import type { Tenant } from './state.js';

type Getter = (invoice: Invoice, tenant: Tenant) => string;
type Predicate = (invoice: Invoice, tenant: Tenant) => boolean;

const FIELDS: Record<string, Getter> = {
  InvoiceID: (i) => i.InvoiceID,
  InvoiceNumber: (i) => i.InvoiceNumber,
  Reference: (i) => i.Reference,
  Url: (i) => i.Url,
  Status: (i) => i.Status,
  Type: (i) => i.Type,
  CurrencyCode: (i) => i.CurrencyCode,
  'Contact.ContactID': (i) => i.ContactID,
  'Contact.Name': (i, t) => t.contacts.get(i.ContactID)?.Name ?? '',
};

/** `null` when the expression is outside the supported subset. */
export function parseWhere(where: string): Predicate | null {
  const terms = where.trim().split(/\s+(?:AND|&&)\s+/i);
  const predicates: Predicate[] = [];
  for (const term of terms) {
    const notNull = /^\(?\s*([A-Za-z.]+)\s*!=\s*null\s*\)?$/i.exec(term.trim());
    if (notNull) {
      const get = FIELDS[notNull[1] as string];
      if (!get) return null;
      predicates.push((invoice, tenant) => get(invoice, tenant) !== '');
      continue;
    }
    const match = /^\(?\s*([A-Za-z.]+)\s*==\s*(?:"([^"]*)"|[Gg]uid\("([^"]*)"\))\s*\)?$/.exec(term.trim());
    const get = match && FIELDS[match[1] as string];
    if (!match || !get) return null;
    const value = (match[2] ?? match[3] ?? '').toLowerCase();
    predicates.push((invoice, tenant) => {
      const field = get(invoice, tenant);
      return field !== '' && field.toLowerCase() === value;
    });
  }
  return (invoice, tenant) => predicates.every((p) => p(invoice, tenant));
}

function list(value: string | undefined): Set<string> | null {
  if (!value) return null;
  return new Set(
    value
      .split(',')
      .map((v) => v.trim().toLowerCase())
      .filter(Boolean),
  );
}

export function listFilter(query: Record<string, string>): Predicate {
  const ids = list(query.IDs);
  const numbers = list(query.InvoiceNumbers);
  const contacts = list(query.ContactIDs);
  const statuses = list(query.Statuses);
  return (i) =>
    (!ids || ids.has(i.InvoiceID.toLowerCase())) &&
    (!numbers || numbers.has(i.InvoiceNumber.toLowerCase())) &&
    (!contacts || contacts.has(i.ContactID.toLowerCase())) &&
    (!statuses || statuses.has(i.Status.toLowerCase()));
}
