import type { Logger } from '@honest-health/platform';
import { Hono, validate } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import { and, eq, sql } from 'drizzle-orm';
import { uuid } from 'zod/mini';
import type { AuthEnv } from '../auth.js';
import { ApiError, errorBody } from '../errors.js';
import { rowsOf } from '../push/rows.js';
import { xeroConnections, xeroGrants } from '../schema.js';
import { connectionEventData, outbox } from '../webhooks/outbox.js';
import type { XeroClient } from '../xero/client.js';
import { chooseConnection, listConnections } from './choose.js';
import { tokenContext } from './grants.js';

export interface ConnectionRoutesDeps {
  xero: XeroClient;
  box: SecretBox;
  log: Logger;
  /** The tick that pushes invoices: choosing a connection that queued waiting pushes schedules it. */
  pushTick?: string;
}

interface Removed {
  tenantId: string;
  xeroConnectionId: string | null;
  grant: {
    id: string;
    sealContext: string | null;
    accessTokenEnc: string | null;
    refreshTokenEnc: string;
    fresh: boolean;
  };
  /** The grant went with its last tenant: its tokens are forgotten here. */
  lastOfGrant: boolean;
}

const notFound = () => new ApiError(404, 'not_found', 'no such connection');

export function connectionRoutes({ xero, box, log, pushTick }: ConnectionRoutesDeps) {
  const routes = new Hono<AuthEnv>();

  routes.get('/', async (c) => {
    const organization = c.get('organization');
    const rows = await c.var.withDatabase((db) => listConnections(db, organization.id));
    return c.json({ data: rows });
  });

  // The organization, by its API key, chooses a tenant it has seen (GET /api/connections names it):
  // `choose` lets POST /api/invoices name it with `tenantId`; `default` also sends it every invoice
  // without one. Both are idempotent, so a repeat answers the same.
  for (const [path, asDefault] of [
    ['choose', false],
    ['default', true],
  ] as const) {
    routes.post(`/:id/${path}`, async (c) => {
      const id = c.req.param('id');
      const organization = c.get('organization');
      if (!validate(uuid(), id).success) throw notFound();
      const chosen = await c.var.withDatabase((db) => chooseConnection(db, organization.id, id, asDefault));
      if (!chosen) throw notFound();
      if (chosen.queued > 0 && pushTick) c.var.schedule(pushTick);
      return c.json(chosen.view);
    });
  }

  // Disconnect one tenant with Xero's DELETE /connections/{id} ("Deletes a connection for this user
  // (i.e. disconnect a tenant)", xero-identity.yaml), and never by revoking the refresh token: that
  // "Revokes a users refresh token and removes all their connections to your app" (xero-node README,
  // revokeToken), which would take every tenant the same Xero user connected, for this organization
  // and for any other. A grant left without a tenant is forgotten here (its tokens deleted); at Xero
  // its consent stays until its refresh token expires unused (docs/xero.md). Invoices that still
  // needed this tenant wait for it to be connected again; they never move to another tenant.
  routes.delete('/:id', async (c) => {
    const id = c.req.param('id');
    const organization = c.get('organization');
    if (!validate(uuid(), id).success) throw notFound();
    const removed = await c.var.withDatabase(async (db): Promise<Removed | undefined> => {
      const [row] = await db
        .select({
          tenantId: xeroConnections.tenantId,
          tenantName: xeroConnections.tenantName,
          xeroConnectionId: xeroConnections.xeroConnectionId,
          grant: {
            id: xeroGrants.id,
            sealContext: xeroGrants.sealContext,
            accessTokenEnc: xeroGrants.accessTokenEnc,
            refreshTokenEnc: xeroGrants.refreshTokenEnc,
            fresh: sql<boolean>`coalesce(${xeroGrants.accessExpiresAt} > now() + interval '30 seconds', false)`,
          },
        })
        .from(xeroConnections)
        .innerJoin(xeroGrants, eq(xeroGrants.id, xeroConnections.grantId))
        .where(and(eq(xeroConnections.id, id), eq(xeroConnections.organizationId, organization.id)));
      if (!row) return undefined;
      // Before the row goes (its delete clears connection_id): the pushes keep their tenant and say why
      // they wait. A push in flight is settled by its tick as usual.
      await db.execute(sql`
        UPDATE invoice_pushes SET status = 'awaiting_connection', tenant_id = ${row.tenantId},
          last_error = ${`its Xero tenant (${row.tenantName ?? row.tenantId}) was disconnected: connect it again and choose it`},
          updated_at = now()
        WHERE connection_id = ${id} AND status IN ('queued', 'failed', 'awaiting_connection')`);
      // The connection.disconnected event is written by the DELETE's own statement.
      const [gone] = rowsOf<{ id: string }>(
        await db.execute(sql`
          WITH gone AS (
            DELETE FROM xero_connections WHERE id = ${id} AND organization_id = ${organization.id}
            RETURNING id, organization_id, tenant_id, tenant_name, 'disconnected through the API'::text AS reason),
          ${outbox('disconnected', 'gone', 'connection.disconnected', connectionEventData)}
          SELECT id FROM gone`),
      );
      if (!gone) return undefined;
      const lastOfGrant = await db
        .delete(xeroGrants)
        .where(
          and(
            eq(xeroGrants.id, row.grant.id),
            sql`NOT EXISTS (SELECT 1 FROM ${xeroConnections} WHERE ${xeroConnections.grantId} = ${xeroGrants.id})`,
          ),
        )
        .returning({ id: xeroGrants.id });
      return { ...row, lastOfGrant: lastOfGrant.length > 0 };
    });
    if (!removed) throw notFound();
    // Xero is told after our rows are gone (we stop pushing at once, whatever Xero answers); best
    // effort, off the answer, and kept alive past it (on Workers an unregistered promise may be cancelled).
    c.var.waitUntil(tellXero(removed).catch((err: unknown) => log.warn('xero disconnect failed', { err })));
    return c.body(null, 204);
  });

  async function accessTokenFor(removed: Removed): Promise<string | undefined> {
    const { grant } = removed;
    if (grant.accessTokenEnc && grant.fresh)
      return box.open(grant.accessTokenEnc, tokenContext(grant, 'access'));
    // A stale token: only a grant already forgotten here may be refreshed for this one call. A grant
    // still in use is the refresh tick's alone (its leases keep one redeemer per refresh token).
    if (!removed.lastOfGrant) return undefined;
    const outcome = await xero.refresh(await box.open(grant.refreshTokenEnc, tokenContext(grant, 'refresh')));
    return outcome.kind === 'ok' ? outcome.tokens.accessToken : undefined;
  }

  async function tellXero(removed: Removed): Promise<void> {
    const accessToken = await accessTokenFor(removed);
    if (!accessToken) {
      log.warn('xero tenant left connected at Xero: no fresh access token to disconnect it with', {
        grant: removed.grant.id,
        tenant: removed.tenantId,
      });
      return;
    }
    // Connections stored before their Xero id was kept are looked up by tenant.
    const connectionId =
      removed.xeroConnectionId ??
      (await xero.connections(accessToken)).find((t) => t.tenantId === removed.tenantId)?.connectionId;
    const outcome = connectionId ? await xero.disconnect(accessToken, connectionId) : 'not_found';
    if (outcome !== 'ok' && outcome !== 'not_found')
      log.warn('xero tenant not disconnected at Xero', {
        grant: removed.grant.id,
        tenant: removed.tenantId,
        outcome,
      });
  }

  routes.all('/', (c) => c.json(errorBody('method_not_allowed', 'use GET'), 405, { allow: 'GET' }));
  routes.all('/:id/choose', (c) =>
    c.json(errorBody('method_not_allowed', 'use POST'), 405, { allow: 'POST' }),
  );
  routes.all('/:id/default', (c) =>
    c.json(errorBody('method_not_allowed', 'use POST'), 405, { allow: 'POST' }),
  );
  routes.all('/:id', (c) => c.json(errorBody('method_not_allowed', 'use DELETE'), 405, { allow: 'DELETE' }));
  return routes;
}
