// Invoices and contacts: validating a submitted invoice the way Xero does (as far as an importer
// cares), storing it, and rendering it in Xero's JSON.

import type { ValidationElement } from './errors.js';
import { msDate, startOfUtcDay, uuid, xeroDateString } from './ids.js';
import type { Tenant } from './state.js';

export type InvoiceType = 'ACCREC' | 'ACCPAY';
export type InvoiceStatus = 'DRAFT' | 'SUBMITTED' | 'AUTHORISED';
export type LineAmountTypes = 'Exclusive' | 'Inclusive' | 'NoTax';

export interface Contact {
  ContactID: string;
  Name: string;
  EmailAddress: string | null;
  isCustomer: boolean;
  isSupplier: boolean;
  createdAt: number;
  updatedAt: number;
}

export interface LineItem {
  LineItemID: string;
  Description: string;
  Quantity: number;
  UnitAmount: number;
  AccountCode: string | null;
  ItemCode: string | null;
  TaxType: string;
  TaxAmount: number;
  DiscountRate: number | null;
  LineAmount: number;
}

export interface Invoice {
  InvoiceID: string;
  InvoiceNumber: string;
  Type: InvoiceType;
  Reference: string;
  /** "URL link to a source document" (xero_accounting.yaml `Invoice.Url`); '' when none. */
  Url: string;
  Status: InvoiceStatus;
  LineAmountTypes: LineAmountTypes;
  ContactID: string;
  date: number;
  dueDate: number | null;
  CurrencyCode: string;
  LineItems: LineItem[];
  SubTotal: number;
  TotalTax: number;
  Total: number;
  createdAt: number;
  updatedAt: number;
}

/** A validated invoice not yet stored: contact not yet resolved or created, no ids or number yet. */
export interface InvoiceDraft {
  type: InvoiceType;
  contact: { contactId: string } | { name: string; email: string | null };
  invoiceNumber: string | null;
  reference: string;
  url: string;
  status: InvoiceStatus;
  lineAmountTypes: LineAmountTypes;
  date: number;
  dueDate: number | null;
  currencyCode: string;
  lineItems: Omit<LineItem, 'LineItemID'>[];
  subTotal: number;
  totalTax: number;
  total: number;
}

/**
 * Where Xero hangs each message: on the invoice element, on its Contact, and on each of its LineItems
 * (by index). xero_accounting.yaml gives Invoice and Contact a `ValidationErrors` array; see README for
 * the line items.
 */
export interface InvoiceErrors {
  invoice: string[];
  contact: string[];
  lineItems: Map<number, string[]>;
}

export type CheckResult = { ok: true; draft: InvoiceDraft } | { ok: false; errors: InvoiceErrors };

/** xero_accounting.yaml 16.1.0, components.schemas.CurrencyCode.enum. */
export const CURRENCY_CODES: ReadonlySet<string> = new Set(
  (
    'AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP BYN BYR ' +
    'BZD CAD CDF CHF CLF CLP CNY COP CRC CUC CUP CVE CZK DJF DKK DOP DZD EEK EGP ERN ETB EUR FJD FKP GBP ' +
    'GEL GHS GIP GMD GNF GTQ GYD HKD HNL HRK HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF ' +
    'KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LTL LVL LYD MAD MDL MGA MKD MMK MNT MOP MRO MRU MUR MVR MWK ' +
    'MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD ' +
    'SCR SDG SEK SGD SHP SKK SLE SLL SOS SRD STD STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH ' +
    'UGX USD UYU UZS VEF VES VND VUV WST XAF XCD XOF XPF YER ZAR ZMW ZMK ZWD'
  ).split(' '),
);

/** Xero keeps two decimal places of UnitAmount unless the request says `unitdp=4`. */
export function roundTo(value: number, places: number): number {
  const factor = 10 ** places;
  return Math.round((value + Math.sign(value) * Number.EPSILON) * factor) / factor;
}

const STATUSES_FOR_CREATION: readonly string[] = ['DRAFT', 'SUBMITTED', 'AUTHORISED'];
const LINE_AMOUNT_TYPES: readonly string[] = ['Exclusive', 'Inclusive', 'NoTax'];

export function round2(value: number): number {
  return Math.round((value + Number.EPSILON) * 100) / 100;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function text(value: unknown): string | null {
  if (typeof value === 'string') return value.trim() === '' ? null : value.trim();
  if (typeof value === 'number') return String(value);
  return null;
}

/** The sandbox's check of `Url` (Xero documents none): an absolute http(s) URL, at most 2,000 characters. */
function isHttpUrl(value: string): boolean {
  if (value.length > 2000) return false;
  try {
    const { protocol } = new URL(value);
    return protocol === 'http:' || protocol === 'https:';
  } catch {
    return false;
  }
}

/** `undefined` when absent, `null` when present but not a number; numeric strings are accepted as Xero does. */
function numeric(value: unknown): number | null | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const n = typeof value === 'number' ? value : typeof value === 'string' ? Number(value) : Number.NaN;
  return Number.isFinite(n) ? n : null;
}

/** Accepts "2024-05-01", "2024-05-01T00:00:00" (any time, optional zone) and "/Date(1714521600000+0000)/". */
export function parseXeroDate(value: unknown): number | null | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') return null;
  const ms = /^\/Date\((-?\d+)([+-]\d{4})?\)\/$/.exec(value);
  if (ms) return startOfUtcDay(Number(ms[1]));
  const iso = /^(\d{4})-(\d{2})-(\d{2})(?:T[\d:.]+(?:Z|[+-]\d{2}:?\d{2})?)?$/.exec(value);
  if (!iso) return null;
  const [, y, m, d] = iso.map(Number) as [number, number, number, number];
  const date = Date.UTC(y, m - 1, d);
  const check = new Date(date);
  return check.getUTCFullYear() === y && check.getUTCMonth() === m - 1 && check.getUTCDate() === d
    ? date
    : null;
}

/**
 * Checks one submitted invoice against the tenant. `numbersInBatch` carries the InvoiceNumbers already
 * claimed by earlier invoices of the same request (they must be unique too).
 */
export function checkInvoice(
  input: unknown,
  tenant: Tenant,
  now: number,
  numbersInBatch: Set<string>,
  unitDecimalPlaces: 2 | 4 = 2,
): CheckResult {
  const contactErrors: string[] = [];
  const lineErrorsByIndex = new Map<number, string[]>();
  if (!isRecord(input))
    return {
      ok: false,
      errors: { invoice: ['An invoice must be a JSON object'], contact: [], lineItems: lineErrorsByIndex },
    };
  const errors: string[] = [];

  const type = text(input.Type);
  if (type === null) errors.push('Invoice Type must be specified');
  else if (type !== 'ACCREC' && type !== 'ACCPAY') errors.push(`'${type}' is not a valid Invoice Type`);

  if (input.InvoiceID !== undefined && input.InvoiceID !== null) {
    errors.push('The sandbox only creates invoices: InvoiceID must not be supplied');
  }

  let contact: InvoiceDraft['contact'] | null = null;
  const contactId = isRecord(input.Contact) ? text(input.Contact.ContactID) : null;
  const contactName = isRecord(input.Contact) ? text(input.Contact.Name) : null;
  if (contactId !== null) {
    if (tenant.contacts.has(contactId)) contact = { contactId };
    else contactErrors.push(`The contact with ContactID '${contactId}' could not be found`);
  } else if (contactName !== null) {
    contact = { name: contactName, email: isRecord(input.Contact) ? text(input.Contact.EmailAddress) : null };
  } else if (isRecord(input.Contact)) {
    contactErrors.push('The contact name must be specified');
  } else {
    errors.push('A Contact must be specified with this type of transaction');
  }

  const status = text(input.Status) ?? 'DRAFT';
  if (!STATUSES_FOR_CREATION.includes(status)) errors.push('Invoice not of valid status for creation');

  const lineAmountTypes = text(input.LineAmountTypes) ?? 'Exclusive';
  if (!LINE_AMOUNT_TYPES.includes(lineAmountTypes)) {
    errors.push(`'${lineAmountTypes}' is not a valid LineAmountTypes value (Exclusive, Inclusive or NoTax)`);
  }

  const date = parseXeroDate(input.Date);
  if (date === null) errors.push(`'${String(input.Date)}' is not a valid Date`);
  const dueDate = parseXeroDate(input.DueDate);
  if (dueDate === null) errors.push(`'${String(input.DueDate)}' is not a valid DueDate`);

  const currencyCode = (text(input.CurrencyCode) ?? tenant.baseCurrency).toUpperCase();
  if (!CURRENCY_CODES.has(currencyCode)) errors.push(`The currency code '${currencyCode}' is not valid`);

  let invoiceNumber = text(input.InvoiceNumber);
  if (invoiceNumber !== null && type === 'ACCREC') {
    const taken =
      numbersInBatch.has(invoiceNumber.toLowerCase()) ||
      tenant.invoiceNumbers.has(invoiceNumber.toLowerCase());
    if (taken) errors.push('Invoice # must be unique.');
  }
  if (invoiceNumber !== null && invoiceNumber.length > 255) {
    errors.push('Invoice Number must be no more than 255 characters');
    invoiceNumber = null;
  }

  const url = text(input.Url);
  if (url !== null && !isHttpUrl(url)) errors.push('Url must be an absolute http or https URL');

  const lineItems: InvoiceDraft['lineItems'] = [];
  if (!Array.isArray(input.LineItems) || input.LineItems.length === 0) {
    errors.push('At least one line item must be specified');
  } else {
    for (const [index, raw] of (input.LineItems as unknown[]).entries()) {
      const lineErrors = new Set<string>();
      const flush = () => {
        if (lineErrors.size > 0) lineErrorsByIndex.set(index, [...lineErrors]);
      };
      if (!isRecord(raw)) {
        lineErrors.add('A line item must be a JSON object');
        flush();
        continue;
      }
      const description = text(raw.Description);
      const itemCode = text(raw.ItemCode);
      if (description === null && itemCode === null)
        lineErrors.add('The Description field is mandatory for each line item.');
      const quantity = numeric(raw.Quantity);
      const unitAmount = numeric(raw.UnitAmount);
      const lineAmount = numeric(raw.LineAmount);
      const discountRate = numeric(raw.DiscountRate);
      const taxAmount = numeric(raw.TaxAmount);
      if (quantity === null) lineErrors.add('Quantity must be a number');
      else if (quantity !== undefined && quantity < 0)
        lineErrors.add('Line item Quantity must not be negative');
      if (unitAmount === null) lineErrors.add('UnitAmount must be a number');
      if (lineAmount === null) lineErrors.add('LineAmount must be a number');
      if (taxAmount === null) lineErrors.add('TaxAmount must be a number');
      if (discountRate === null || (discountRate !== undefined && (discountRate < 0 || discountRate > 100))) {
        lineErrors.add('DiscountRate must be a number between 0 and 100');
      }
      const accountCode = text(raw.AccountCode);
      if (accountCode !== null && tenant.accountCodes !== null && !tenant.accountCodes.has(accountCode)) {
        lineErrors.add(`Account code '${accountCode}' is not a valid code for this document.`);
      }
      flush();
      // Quantity keeps 4 places; UnitAmount 2 unless unitdp=4 (the spec: "By default UnitPrice is rounded
      // to two decimal places"). Xero rounds silently: no message says so.
      const qty = roundTo(quantity ?? 1, 4);
      const unit = roundTo(
        unitAmount ?? (typeof lineAmount === 'number' && qty !== 0 ? lineAmount / qty : 0),
        unitDecimalPlaces,
      );
      const discount = typeof discountRate === 'number' ? discountRate : null;
      lineItems.push({
        Description: description ?? '',
        Quantity: typeof qty === 'number' ? qty : 0,
        UnitAmount: typeof unit === 'number' ? unit : 0,
        AccountCode: accountCode,
        ItemCode: itemCode,
        TaxType: text(raw.TaxType) ?? 'NONE',
        TaxAmount: lineAmountTypes === 'NoTax' ? 0 : round2(typeof taxAmount === 'number' ? taxAmount : 0),
        DiscountRate: discount,
        LineAmount: round2(
          (typeof qty === 'number' ? qty : 0) *
            (typeof unit === 'number' ? unit : 0) *
            (1 - (discount ?? 0) / 100),
        ),
      });
    }
  }

  const lineTotal = round2(lineItems.reduce((sum, line) => sum + line.LineAmount, 0));
  const totalTax = round2(lineItems.reduce((sum, line) => sum + line.TaxAmount, 0));
  const subTotal = lineAmountTypes === 'Inclusive' ? round2(lineTotal - totalTax) : lineTotal;
  const total = round2(subTotal + totalTax);
  if (lineItems.length > 0 && total < 0) errors.push('Invoice total must not be negative');

  if (errors.length > 0 || contactErrors.length > 0 || lineErrorsByIndex.size > 0 || contact === null)
    return { ok: false, errors: { invoice: errors, contact: contactErrors, lineItems: lineErrorsByIndex } };
  if (invoiceNumber !== null && type === 'ACCREC') numbersInBatch.add(invoiceNumber.toLowerCase());
  return {
    ok: true,
    draft: {
      type: type as InvoiceType,
      contact,
      invoiceNumber,
      reference: text(input.Reference) ?? '',
      url: url ?? '',
      status: status as InvoiceStatus,
      lineAmountTypes: lineAmountTypes as LineAmountTypes,
      date: date ?? startOfUtcDay(now),
      dueDate: dueDate ?? null,
      currencyCode,
      lineItems,
      subTotal,
      totalTax,
      total,
    },
  };
}

function resolveContact(tenant: Tenant, draft: InvoiceDraft, now: number): Contact {
  let contact: Contact | undefined;
  if ('contactId' in draft.contact) {
    contact = tenant.contacts.get(draft.contact.contactId);
  } else {
    const name = draft.contact.name.toLowerCase();
    contact = [...tenant.contacts.values()].find((c) => c.Name.toLowerCase() === name);
    if (!contact) {
      contact = {
        ContactID: uuid(),
        Name: draft.contact.name,
        EmailAddress: draft.contact.email,
        isCustomer: false,
        isSupplier: false,
        createdAt: now,
        updatedAt: now,
      };
      tenant.contacts.set(contact.ContactID, contact);
    }
  }
  if (!contact) throw new Error('contact vanished between validation and storage');
  if (draft.type === 'ACCREC') contact.isCustomer = true;
  else contact.isSupplier = true;
  return contact;
}

export function storeInvoice(tenant: Tenant, draft: InvoiceDraft, now: number): Invoice {
  const contact = resolveContact(tenant, draft, now);
  let number = draft.invoiceNumber ?? '';
  if (draft.type === 'ACCREC' && number === '') {
    do {
      tenant.nextInvoiceNumber += 1;
      number = `INV-${String(tenant.nextInvoiceNumber).padStart(4, '0')}`;
    } while (tenant.invoiceNumbers.has(number.toLowerCase()));
  }
  const invoice: Invoice = {
    InvoiceID: uuid(),
    InvoiceNumber: number,
    Type: draft.type,
    Reference: draft.reference,
    Url: draft.url,
    Status: draft.status,
    LineAmountTypes: draft.lineAmountTypes,
    ContactID: contact.ContactID,
    date: draft.date,
    dueDate: draft.dueDate,
    CurrencyCode: draft.currencyCode,
    LineItems: draft.lineItems.map((line) => ({ LineItemID: uuid(), ...line })),
    SubTotal: draft.subTotal,
    TotalTax: draft.totalTax,
    Total: draft.total,
    createdAt: now,
    updatedAt: now,
  };
  tenant.invoices.set(invoice.InvoiceID, invoice);
  if (draft.type === 'ACCREC' && number !== '') tenant.invoiceNumbers.add(number.toLowerCase());
  return invoice;
}

export function contactJson(contact: Contact): Record<string, unknown> {
  return {
    ContactID: contact.ContactID,
    ContactStatus: 'ACTIVE',
    Name: contact.Name,
    ...(contact.EmailAddress ? { EmailAddress: contact.EmailAddress } : {}),
    Addresses: [],
    Phones: [],
    UpdatedDateUTC: msDate(contact.updatedAt),
    ContactGroups: [],
    IsSupplier: contact.isSupplier,
    IsCustomer: contact.isCustomer,
    ContactPersons: [],
    HasAttachments: false,
    HasValidationErrors: false,
  };
}

export function invoiceJson(tenant: Tenant, invoice: Invoice): Record<string, unknown> {
  const contact = tenant.contacts.get(invoice.ContactID);
  return {
    Type: invoice.Type,
    InvoiceID: invoice.InvoiceID,
    InvoiceNumber: invoice.InvoiceNumber,
    Reference: invoice.Reference,
    ...(invoice.Url === '' ? {} : { Url: invoice.Url }),
    Payments: [],
    CreditNotes: [],
    Prepayments: [],
    Overpayments: [],
    AmountDue: invoice.Total,
    AmountPaid: 0,
    AmountCredited: 0,
    CurrencyRate: 1,
    IsDiscounted: invoice.LineItems.some((line) => line.DiscountRate !== null),
    HasAttachments: false,
    HasErrors: false,
    Contact: contact ? contactJson(contact) : { ContactID: invoice.ContactID },
    DateString: xeroDateString(invoice.date),
    Date: msDate(invoice.date),
    ...(invoice.dueDate === null
      ? {}
      : { DueDateString: xeroDateString(invoice.dueDate), DueDate: msDate(invoice.dueDate) }),
    Status: invoice.Status,
    LineAmountTypes: invoice.LineAmountTypes,
    LineItems: invoice.LineItems.map((line) => ({
      Description: line.Description,
      UnitAmount: line.UnitAmount,
      TaxType: line.TaxType,
      TaxAmount: line.TaxAmount,
      LineAmount: line.LineAmount,
      ...(line.AccountCode === null ? {} : { AccountCode: line.AccountCode }),
      ...(line.ItemCode === null ? {} : { ItemCode: line.ItemCode }),
      ...(line.DiscountRate === null ? {} : { DiscountRate: line.DiscountRate }),
      Tracking: [],
      Quantity: line.Quantity,
      LineItemID: line.LineItemID,
    })),
    SubTotal: invoice.SubTotal,
    TotalTax: invoice.TotalTax,
    Total: invoice.Total,
    UpdatedDateUTC: msDate(invoice.updatedAt),
    CurrencyCode: invoice.CurrencyCode,
  };
}

const messages = (list: string[]) => list.map((Message) => ({ Message }));

/**
 * How Xero echoes a rejected invoice inside a ValidationException's Elements: each message on the
 * element it is about (the invoice, its Contact, each LineItem), the all-zero InvoiceID and HasErrors.
 */
export function rejectedInvoiceJson(input: unknown, errors: InvoiceErrors): ValidationElement {
  const submitted = isRecord(input) ? input : {};
  const contact = isRecord(submitted.Contact) ? submitted.Contact : undefined;
  const lines = Array.isArray(submitted.LineItems) ? (submitted.LineItems as unknown[]) : undefined;
  return {
    ...submitted,
    InvoiceID: '00000000-0000-0000-0000-000000000000',
    HasErrors: true,
    ...(contact
      ? {
          Contact: {
            ...contact,
            ...(errors.contact.length > 0
              ? { HasValidationErrors: true, ValidationErrors: messages(errors.contact) }
              : {}),
          },
        }
      : {}),
    ...(lines
      ? {
          LineItems: lines.map((line, i) => {
            const lineErrors = errors.lineItems.get(i);
            const base = isRecord(line) ? line : {};
            return lineErrors ? { ...base, ValidationErrors: messages(lineErrors) } : base;
          }),
        }
      : {}),
    ValidationErrors: messages(errors.invoice),
  };
}

/** Every message of a rejected invoice, in order: invoice, Contact, LineItems. */
export function allMessages(errors: InvoiceErrors): string[] {
  return [...errors.invoice, ...errors.contact, ...[...errors.lineItems.values()].flat()];
}
