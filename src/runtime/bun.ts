import { honestHealth } from '../app/module.js';
import { runOnBun } from '../platform/runtimes/bun.js';

await runOnBun(honestHealth);
