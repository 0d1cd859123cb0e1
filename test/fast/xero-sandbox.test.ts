// The Xero sandbox in process: the same app without a socket (what the fast layer's Xero calls use).
// The rest of the sandbox is tested over real HTTP in test/xero-sandbox.test.ts.
import { describe, expect, it } from 'vitest';
import { createXeroSandbox } from '../../tools/xero-sandbox/app.js';
import { inProcessFetch } from '../../tools/xero-sandbox/in-process.js';
import { sandboxInvoice } from '../support/sandbox-invoice.js';

describe('in-process use', () => {
  it('serves the same app without a socket; a drop becomes a TypeError', async () => {
    const { app, state } = createXeroSandbox();
    const fetchSandbox = inProcessFetch(app);
    const { tokens } = state.createGrant();
    const tenantId = [...state.tenants.keys()][0] as string;
    state.faults.add({ target: 'invoices', kind: 'drop' });
    const put = () =>
      fetchSandbox('/api.xro/2.0/Invoices', {
        method: 'PUT',
        headers: {
          authorization: `Bearer ${tokens.access_token}`,
          'xero-tenant-id': tenantId,
          'idempotency-key': 'k1',
        },
        body: JSON.stringify({ Invoices: [sandboxInvoice()] }),
      });
    await expect(put()).rejects.toThrow(TypeError);
    expect((await put()).status).toBe(200);
    expect(state.stats.invoicesCreated[tenantId]).toBe(1);
  });
});
