// GET /connections (the tenants a token's grant is connected to) and DELETE /connections/{id}.
import { Hono } from 'hono';
import { type ApiEnv, requireAccessToken } from './api-guards.js';
import { json, notFound } from './errors.js';
import { connectionDate } from './ids.js';
import type { SandboxState } from './state.js';

export function connectionRoutes(state: SandboxState): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  app.use('*', requireAccessToken(state));

  app.get('/', (c) => {
    const grant = c.get('grant');
    const authEventId = c.req.query('authEventId');
    const connections =
      authEventId && authEventId !== grant.authEventId ? [] : [...grant.connections.values()];
    return json(
      200,
      connections.flatMap((connection) => {
        const tenant = state.tenants.get(connection.tenantId);
        if (!tenant) return [];
        return [
          {
            id: connection.id,
            authEventId: connection.authEventId,
            tenantId: tenant.id,
            tenantType: tenant.tenantType,
            tenantName: tenant.name,
            createdDateUtc: connectionDate(connection.createdAt),
            updatedDateUtc: connectionDate(connection.updatedAt),
          },
        ];
      }),
    );
  });

  // Disconnecting the last tenant also revokes the grant's refresh token, as Xero does.
  app.delete('/:id', (c) => {
    const grant = c.get('grant');
    const connection = [...grant.connections.values()].find((conn) => conn.id === c.req.param('id'));
    if (!connection) return notFound();
    grant.connections.delete(connection.tenantId);
    if (grant.connections.size === 0 && state.identity.revokeGrant(grant.authEventId, state.now())) {
      state.stats.revocations += 1;
    }
    return c.body(null, 204);
  });

  return app;
}
