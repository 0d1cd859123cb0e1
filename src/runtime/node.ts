import { runOnNode } from '@honest-health/platform/node';
import { processDatabases } from '../app/databases.js';
import { honestHealthWithDevelopmentSandbox } from '../app/dev/sandbox.js';

// Fly names each machine; elsewhere the platform uses the host name.
await runOnNode(honestHealthWithDevelopmentSandbox, {
  databases: processDatabases,
  instanceId: process.env.FLY_MACHINE_ID,
});
