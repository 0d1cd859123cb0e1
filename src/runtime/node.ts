import { hostname } from 'node:os';
import { startServer } from '../app/server.js';
import { listenNode } from './node-listener.js';

const shutdown = await startServer({
  env: process.env,
  listen: listenNode,
  instanceId: process.env.FLY_MACHINE_ID ?? hostname(),
  exit: (code) => process.exit(code),
});

for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => void shutdown(signal));
