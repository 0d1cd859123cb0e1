import { runOnNode } from '@honest-health/platform/node';
import { processDatabases } from '../app/databases.js';
import { honestHealthProcess } from '../app/process-module.js';

// Fly names each machine; elsewhere the platform uses the host name.
await runOnNode(honestHealthProcess, {
  databases: processDatabases,
  instanceId: process.env.FLY_MACHINE_ID,
});
