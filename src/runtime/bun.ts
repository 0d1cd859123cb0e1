import { runOnBun } from '@honest-health/platform/bun';
import { honestHealthWithDevelopmentSandbox } from '../app/dev/sandbox.js';

await runOnBun(honestHealthWithDevelopmentSandbox);
