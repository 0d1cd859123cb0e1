// Our invoice payload against xero-node's models, without the sandbox: the SDK's own serializer must
// produce exactly what toXeroInvoice sends. (test/xero-node-contract.test.ts drives the SDK over HTTP.)
import { describe, expect, it } from 'vitest';
import { ObjectSerializer } from 'xero-node';
import { toXeroInvoice } from '../../src/app/invoices/xero-payload.js';
import { asSdkInvoice, stored } from '../support/sdk-invoice.js';

describe('our invoice payload and xero-node’s models', () => {
  it('serialises, through the SDK’s own ObjectSerializer, to exactly what toXeroInvoice sends', () => {
    const payload = toXeroInvoice(stored, 'https://importer.example/api/invoices/p-1');
    expect(payload).toMatchObject({ Reference: 'PO-1', Url: 'https://importer.example/api/invoices/p-1' });
    expect(ObjectSerializer.serialize(asSdkInvoice(payload), 'Invoice')).toEqual(payload);
    expect(typeof payload.LineItems[0]?.Quantity).toBe('number');
    expect(typeof payload.LineItems[0]?.UnitAmount).toBe('number');
  });
});
