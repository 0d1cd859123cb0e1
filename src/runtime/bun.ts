import { honestHealthWithDevelopmentSandbox } from '../app/dev/sandbox.js';
import { runOnBun } from '../platform/runtimes/bun.js';

await runOnBun(honestHealthWithDevelopmentSandbox);
