import { honestHealth } from '../app/module.js';
import { runOnNode } from '../platform/runtimes/node.js';

await runOnNode(honestHealth);
