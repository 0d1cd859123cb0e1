import { runOnNode } from '@honest-health/platform/node';
import { processDatabases } from '../app/databases.js';
import { honestHealthWithDevelopmentSandbox } from '../app/dev/sandbox.js';

await runOnNode(honestHealthWithDevelopmentSandbox, { databases: processDatabases });
