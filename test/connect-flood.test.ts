// Strangers spend nothing we don't allow: the unauthenticated connect pages are limited per client
// address (from a trusted proxy's header only when configured, else the socket), refuse malformed and
// unknown links before any write, and a flood of unknown links costs the database next to nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { floodConnect } from './support/connect-flood.js';
import { migratedDatabase } from './support/databases.js';
import type { Cluster } from './support/postgres.js';
import { type ServerProcess, spawnServer } from './support/server.js';
import { sharedCluster } from './support/shared-postgres.js';
import { type Sandbox, sandboxEnv } from './support/ticks.js';

let cluster: Cluster;
let sandbox: Sandbox;
let url: string;
let direct: ServerProcess;
let behindFly: ServerProcess;

const env = (extra: Record<string, string> = {}) => ({
  DATABASE_URL: url,
  // No tick during the measurement: what is counted is the requests' own cost.
  TICK_INTERVAL_MS: '3600000',
  API_KEY_REFRESH_MS: '3600000',
  ...sandboxEnv(sandbox),
  CONNECT_RATE_PER_MINUTE: '60',
  CONNECT_RATE_BURST: '5',
  ...extra,
});

beforeAll(async () => {
  [cluster, sandbox] = await Promise.all([sharedCluster(), startXeroSandbox({ port: 0 })]);
  url = await migratedDatabase(cluster);
  direct = await spawnServer({ env: env() });
  await direct.waitForReady();
  behindFly = await spawnServer({ env: env({ CLIENT_IP_HEADER: 'fly-client-ip' }) });
  await behindFly.waitForReady();
});
afterAll(async () => {
  await direct?.stop();
  await behindFly?.stop();
  await sandbox?.close();
  await cluster?.remove();
});

const start = (server: ServerProcess, headers: Record<string, string> = {}) =>
  server.get(`/connect/xero/start?link=${'A'.repeat(43)}`, {
    method: 'POST',
    headers: { accept: 'application/json', ...headers },
  });

describe('the connect pages, for strangers', () => {
  it('a flood of unknown links and states: never a 5xx, and at most 0.05 transactions each', async () => {
    const flood = await floodConnect({
      baseUrl: direct.url,
      databaseUrl: url,
      requests: 1200,
      concurrency: 20,
    });
    const statuses = Object.keys(flood.statuses).map(Number);
    expect(
      // 200: the confirm page, which reads nothing.
      statuses.every((s) => [200, 400, 429].includes(s)),
      JSON.stringify(flood.statuses),
    ).toBe(true);
    expect(flood.xactsPerRequest, JSON.stringify(flood)).toBeLessThanOrEqual(0.05);
  }, 120_000);

  it('limits per address: the trusted proxy header only where configured, else the socket', async () => {
    // The socket is the address: a header naming another does not buy a new allowance.
    let lastDirect = 0;
    for (let i = 0; i < 8; i++) lastDirect = (await start(direct, { 'fly-client-ip': `10.0.0.${i}` })).status;
    expect(lastDirect).toBe(429);
    const limited = await start(direct);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(((await limited.json()) as { error: { code: string } }).error.code).toBe('rate_limited');

    // Behind Fly the header is the client: one address is limited, another still served.
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++)
      statuses.push((await start(behindFly, { 'fly-client-ip': '10.1.1.1' })).status);
    expect(statuses.slice(0, 5)).toEqual([400, 400, 400, 400, 400]);
    expect(statuses.at(-1)).toBe(429);
    expect((await start(behindFly, { 'fly-client-ip': '10.1.1.2' })).status).toBe(400);
  });
});
