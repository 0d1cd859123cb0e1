import { honestHealthWithDevelopmentSandbox } from '../app/dev/sandbox.js';
import { runOnNode } from '../platform/runtimes/node.js';

await runOnNode(honestHealthWithDevelopmentSandbox);
