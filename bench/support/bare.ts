// The bare Hono hello-world baseline (bench/support/bare-hono.ts) as its own Node process.
import { type ScriptServer, spawnScriptServer } from './script-server.js';

export type BareServer = ScriptServer;

export const spawnBareHono = (): Promise<BareServer> =>
  spawnScriptServer({ script: 'bench/support/bare-hono.ts' });
