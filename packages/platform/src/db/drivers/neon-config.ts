import { neonConfig } from '@neondatabase/serverless';

export interface NeonSettings {
  /** The local Neon proxy (dev/neon-proxy) for development and tests, e.g. http://127.0.0.1:4444. */
  localProxy?: string;
}

// neonConfig is global to the driver module; one process talks to one database, so the driver
// factory sets it once rather than per pool.
// Every runtime we support (Node 22+, Bun, workerd) has a global WebSocket, which the driver uses
// when no constructor is configured.
export function configureNeon({ localProxy }: NeonSettings): void {
  if (!localProxy) return;
  const proxy = new URL(localProxy);
  neonConfig.fetchEndpoint = `${proxy.origin}/sql`;
  neonConfig.wsProxy = () => `${proxy.host}/v2`;
  neonConfig.useSecureWebSocket = proxy.protocol === 'https:';
  // Plain Postgres behind the proxy does not accept Neon's pipelined startup (password before the ask).
  neonConfig.pipelineConnect = false;
}
