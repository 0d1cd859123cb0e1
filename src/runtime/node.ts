import { hostname } from 'node:os';
import { startServer } from '../app/server.js';
import { listenNode } from './node-listener.js';

await startServer({
  name: 'node',
  version: process.versions.node,
  env: process.env,
  listen: listenNode,
  instanceId: process.env.FLY_MACHINE_ID ?? hostname(),
  exit: (code) => process.exit(code),
  onSignal: (handler) => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => handler(signal));
  },
});
