import { runOnBun } from '@honest-health/platform/bun';
import { processDatabases } from '../app/databases.js';
import { honestHealthWithDevelopmentSandbox } from '../app/dev/sandbox.js';

// Fly names each machine; elsewhere the platform uses the host name.
await runOnBun(honestHealthWithDevelopmentSandbox, {
  databases: processDatabases,
  instanceId: process.env.FLY_MACHINE_ID,
});
