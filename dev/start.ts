// `npm start` (after the build) and `npm run start:bun`: the product's entry as built, unless nothing
// is configured (README, "Two commands"), where this starts the Xero sandbox on a loopback port and
// then the product's server wired to it (dev/development.ts). The product never imports this folder,
// so the sandbox is in no build of it: `node dist/node.js` (the Docker image) with nothing set runs
// with Xero unconfigured.
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { wantsDevelopmentSandbox } from './mode.js';
import type { RunningXeroSandbox } from './xero-sandbox/server.js';

const onBun = process.versions.bun !== undefined;

if (!wantsDevelopmentSandbox(process.env)) {
  // Bun runs the TypeScript entry; Node the bundle `npm run build` just wrote.
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  await import(onBun ? '../src/runtime/bun.js' : pathToFileURL(join(root, 'dist/node.js')).href);
} else {
  const { developmentSandboxOptions, withDevelopmentSandbox } = await import('./development.js');
  const { startXeroSandbox } = await import('./xero-sandbox/server.js');
  const { processDatabases } = await import('../src/app/databases.js');
  // Under `bun --hot` this module runs again on every change: the sandbox (and the grants it issued)
  // outlives the reloads instead of leaving a listener behind each time.
  const held = globalThis as { developmentXeroSandbox?: Promise<RunningXeroSandbox> };
  held.developmentXeroSandbox ??= startXeroSandbox({
    host: '127.0.0.1',
    ...developmentSandboxOptions(crypto.randomUUID()),
  });
  const module = withDevelopmentSandbox(await held.developmentXeroSandbox);
  const options = { databases: processDatabases, instanceId: process.env.FLY_MACHINE_ID };
  if (onBun) await (await import('@honest-health/platform/bun')).runOnBun(module, options);
  else await (await import('@honest-health/platform/node')).runOnNode(module, options);
}
