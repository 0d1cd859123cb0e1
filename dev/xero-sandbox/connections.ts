// GET /connections (the tenants the token's user connected to the app) and DELETE /connections/{id}.
import { Hono } from 'hono';
import { type ApiEnv, requireAccessToken } from './api-guards.js';
import { json, notFound } from './errors.js';
import { connectionDate } from './ids.js';
import type { SandboxState } from './state.js';

export function connectionRoutes(state: SandboxState): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  app.use('*', requireAccessToken(state));

  app.get('/', (c) => {
    // Every tenant the user connected to the app, from any consent; ?authEventId= narrows it to one
    // consent (xero-identity.yaml: "Retrieves the connections for this user", authEventId "Filter by
    // authEventId").
    const grant = c.get('grant');
    const authEventId = c.req.query('authEventId');
    const connections = state.identity
      .userConnections(grant.clientId)
      .filter((connection) => !authEventId || connection.authEventId === authEventId)
      .sort((a, b) => a.createdAt - b.createdAt);
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

  // One tenant goes ("Deletes a connection for this user (i.e. disconnect a tenant)"); the grant and its
  // tokens stay, even when it was the grant's last tenant (choice: see README).
  app.delete('/:id', (c) => {
    const grant = c.get('grant');
    const connection = state.identity.deleteConnection(grant.clientId, c.req.param('id'));
    if (!connection) return notFound();
    state.stats.disconnections += 1;
    return c.body(null, 204);
  });

  return app;
}
