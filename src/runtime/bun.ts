import { runOnBun } from '@honest-health/platform/bun';
import { processDatabases } from '../app/databases.js';
import { honestHealthWithDevelopmentSandbox } from '../app/dev/sandbox.js';

await runOnBun(honestHealthWithDevelopmentSandbox, { databases: processDatabases });
