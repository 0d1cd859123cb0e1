import { hostname } from 'node:os';
import { WebSocket } from 'ws';
import { startServer } from '../app/server.js';
import { listenNode } from './node-listener.js';

await startServer({
  env: process.env,
  listen: listenNode,
  instanceId: process.env.FLY_MACHINE_ID ?? hostname(),
  exit: (code) => process.exit(code),
  webSocket: WebSocket,
  onSignal: (handler) => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => handler(signal));
  },
});
