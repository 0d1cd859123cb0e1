import { neonConfig } from '@neondatabase/serverless';

export interface NeonSettings {
  /** The local Neon proxy (tools/neon-proxy) for development and tests, e.g. http://127.0.0.1:4444. */
  localProxy?: string;
  /** Node 20 has no global WebSocket: its runtime entry passes the `ws` package's. */
  webSocket?: unknown;
}

// neonConfig is global to the driver module; one process talks to one database, so the driver
// factory sets it once rather than per pool.
export function configureNeon({ localProxy, webSocket }: NeonSettings): void {
  if (webSocket) neonConfig.webSocketConstructor = webSocket as typeof neonConfig.webSocketConstructor;
  if (!localProxy) return;
  const proxy = new URL(localProxy);
  neonConfig.fetchEndpoint = `${proxy.origin}/sql`;
  neonConfig.wsProxy = () => `${proxy.host}/v2`;
  neonConfig.useSecureWebSocket = proxy.protocol === 'https:';
  // Plain Postgres behind the proxy does not accept Neon's pipelined startup (password before the ask).
  neonConfig.pipelineConnect = false;
}
