import { and, eq, sql } from 'drizzle-orm';
import { Hono } from 'hono';
import { uuid } from 'zod/mini';
import type { Logger } from '../../platform/log.js';
import type { SecretBox } from '../../platform/secret-box.js';
import { validate } from '../../platform/validate.js';
import type { AuthEnv } from '../auth.js';
import { ApiError, errorBody } from '../errors.js';
import { invoicePushes, xeroConnections, xeroGrants } from '../schema.js';
import type { XeroClient } from '../xero/client.js';
import { tokenContext } from './grants.js';

export interface ConnectionRoutesDeps {
  xero: XeroClient;
  box: SecretBox;
  log: Logger;
}

const view = {
  id: xeroConnections.id,
  tenantId: xeroConnections.tenantId,
  tenantName: xeroConnections.tenantName,
  status: xeroConnections.status,
  // A grant whose refresh is failing (its token does not open, Xero unreachable) says why here too.
  statusReason: sql<string | null>`coalesce(${xeroConnections.statusReason}, ${xeroGrants.refreshError})`,
  grantId: xeroConnections.grantId,
  createdAt: xeroConnections.createdAt,
};

export function connectionRoutes({ xero, box, log }: ConnectionRoutesDeps) {
  const routes = new Hono<AuthEnv>();

  routes.get('/', async (c) => {
    const organization = c.get('organization');
    const rows = await c.var.idempotent((db) =>
      db
        .select(view)
        .from(xeroConnections)
        .leftJoin(xeroGrants, eq(xeroGrants.id, xeroConnections.grantId))
        .where(eq(xeroConnections.organizationId, organization.id))
        .orderBy(xeroConnections.createdAt),
    );
    return c.json({ data: rows });
  });

  // Disconnect one tenant. Xero has two ways and they differ: DELETE /connections/{id} drops one tenant
  // ("Deletes a connection for this user (i.e. disconnect a tenant)", xero-identity.yaml), while
  // revoking the refresh token drops the whole grant, every tenant of the consent. So the token is
  // revoked only when the grant's last tenant leaves; otherwise only this tenant's connection goes.
  // Invoices that still needed this connection wait for a new one instead of failing.
  routes.delete('/:id', async (c) => {
    const id = c.req.param('id');
    const organization = c.get('organization');
    if (!validate(uuid(), id).success) throw new ApiError(404, 'not_found', 'no such connection');
    const removed = await c.var.idempotent(async (db) => {
      const [row] = await db
        .delete(xeroConnections)
        .where(and(eq(xeroConnections.id, id), eq(xeroConnections.organizationId, organization.id)))
        .returning({
          tenantId: xeroConnections.tenantId,
          grantId: xeroConnections.grantId,
          xeroConnectionId: xeroConnections.xeroConnectionId,
        });
      if (!row) return undefined;
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
      // The grant goes with its last tenant; a grant that still has tenants stays as it is.
      const [lastOfGrant] = await db
        .delete(xeroGrants)
        .where(
          and(
            eq(xeroGrants.id, row.grantId),
            sql`NOT EXISTS (SELECT 1 FROM ${xeroConnections} WHERE ${xeroConnections.grantId} = ${xeroGrants.id})`,
          ),
        )
        .returning({
          id: xeroGrants.id,
          sealContext: xeroGrants.sealContext,
          refreshTokenEnc: xeroGrants.refreshTokenEnc,
        });
      if (lastOfGrant) return { ...row, lastOfGrant, grant: undefined };
      const [grant] = await db
        .select({
          id: xeroGrants.id,
          sealContext: xeroGrants.sealContext,
          accessTokenEnc: xeroGrants.accessTokenEnc,
          fresh: sql<boolean>`${xeroGrants.accessExpiresAt} > now() + interval '5 seconds'`,
        })
        .from(xeroGrants)
        .where(eq(xeroGrants.id, row.grantId));
      return { ...row, lastOfGrant: undefined, grant };
    });
    if (!removed) throw new ApiError(404, 'not_found', 'no such connection');
    // Xero is told after our rows are gone (we stop pushing at once, whatever Xero answers); best effort.
    void tellXero(removed).catch((err: unknown) => log.warn('xero disconnect failed', { err }));
    return c.body(null, 204);
  });

  async function tellXero(removed: {
    tenantId: string;
    xeroConnectionId: string | null;
    lastOfGrant: { id: string; sealContext: string | null; refreshTokenEnc: string } | undefined;
    grant:
      | { id: string; sealContext: string | null; accessTokenEnc: string | null; fresh: boolean }
      | undefined;
  }): Promise<void> {
    if (removed.lastOfGrant) {
      const refreshToken = await box.open(
        removed.lastOfGrant.refreshTokenEnc,
        tokenContext(removed.lastOfGrant, 'refresh'),
      );
      if (!(await xero.revoke(refreshToken)))
        log.warn('xero revocation failed; the grant expires unused at Xero', {
          grant: removed.lastOfGrant.id,
        });
      return;
    }
    const grant = removed.grant;
    if (!grant?.accessTokenEnc || !grant.fresh) {
      log.warn('xero tenant not disconnected at Xero: its grant has no fresh access token', {
        grant: grant?.id,
        tenant: removed.tenantId,
      });
      return;
    }
    const accessToken = await box.open(grant.accessTokenEnc, tokenContext(grant, 'access'));
    // Connections stored before their Xero id was kept are looked up by tenant.
    const connectionId =
      removed.xeroConnectionId ??
      (await xero.connections(accessToken)).find((t) => t.tenantId === removed.tenantId)?.connectionId;
    const outcome = connectionId ? await xero.disconnect(accessToken, connectionId) : 'not_found';
    if (outcome !== 'ok' && outcome !== 'not_found')
      log.warn('xero tenant not disconnected at Xero', {
        grant: grant.id,
        tenant: removed.tenantId,
        outcome,
      });
  }

  routes.all('/', (c) => c.json(errorBody('method_not_allowed', 'use GET'), 405, { allow: 'GET' }));
  routes.all('/:id', (c) => c.json(errorBody('method_not_allowed', 'use DELETE'), 405, { allow: 'DELETE' }));
  return routes;
}
