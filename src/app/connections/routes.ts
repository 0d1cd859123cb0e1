import { and, eq, sql } from 'drizzle-orm';
import { Hono } from 'hono';
import { uuid } from 'zod';
import type { DatabaseHandle } from '../../platform/db/handle.js';
import { withPoisonRetry } from '../../platform/db/poison-retry.js';
import type { Database } from '../../platform/db/types.js';
import type { Logger } from '../../platform/log.js';
import type { SecretBox } from '../../platform/secret-box.js';
import type { AuthEnv } from '../auth.js';
import { ApiError, errorBody } from '../errors.js';
import { invoicePushes, xeroConnections } from '../schema.js';
import type { XeroClient } from '../xero/client.js';
import { tokenContext } from '../xero/connections.js';

export interface ConnectionRoutesDeps {
  database: DatabaseHandle;
  xero: XeroClient;
  box: SecretBox;
  log: Logger;
}

const view = {
  id: xeroConnections.id,
  tenantId: xeroConnections.tenantId,
  tenantName: xeroConnections.tenantName,
  status: xeroConnections.status,
  accessExpiresAt: xeroConnections.accessExpiresAt,
  createdAt: xeroConnections.createdAt,
};

export function connectionRoutes({ database, xero, box, log }: ConnectionRoutesDeps) {
  const routes = new Hono<AuthEnv>();
  const run = <T>(fn: (db: Database) => Promise<T>) =>
    withPoisonRetry(database, fn, { retry: true, source: 'request', log });

  routes.get('/', async (c) => {
    const organization = c.get('organization');
    const rows = await run((db) =>
      db
        .select(view)
        .from(xeroConnections)
        .where(eq(xeroConnections.organizationId, organization.id))
        .orderBy(xeroConnections.createdAt),
    );
    return c.json({ data: rows });
  });

  // Disconnect: the tokens are deleted here (and revoked at Xero, best effort); invoices that still
  // needed this connection wait for a new one instead of failing.
  routes.delete('/:id', async (c) => {
    const id = c.req.param('id');
    const organization = c.get('organization');
    if (!uuid().safeParse(id).success) throw new ApiError(404, 'not_found', 'no such connection');
    const removed = await run(async (db) => {
      const [row] = await db
        .delete(xeroConnections)
        .where(and(eq(xeroConnections.id, id), eq(xeroConnections.organizationId, organization.id)))
        .returning({ tenantId: xeroConnections.tenantId, refreshTokenEnc: xeroConnections.refreshTokenEnc });
      if (row) {
        await db
          .update(invoicePushes)
          .set({ status: 'awaiting_connection', updatedAt: sql`now()` })
          .where(
            and(
              eq(invoicePushes.organizationId, organization.id),
              sql`${invoicePushes.connectionId} IS NULL`,
              sql`${invoicePushes.status} IN ('queued', 'failed')`,
            ),
          );
      }
      return row;
    });
    if (!removed) throw new ApiError(404, 'not_found', 'no such connection');
    const refreshToken = await box
      .open(removed.refreshTokenEnc, tokenContext(organization.id, removed.tenantId, 'refresh'))
      .catch(() => undefined);
    if (refreshToken) void xero.revoke(refreshToken);
    return c.body(null, 204);
  });

  routes.all('/', (c) => c.json(errorBody('method_not_allowed', 'use GET'), 405, { allow: 'GET' }));
  routes.all('/:id', (c) => c.json(errorBody('method_not_allowed', 'use DELETE'), 405, { allow: 'DELETE' }));
  return routes;
}
