import { runOnNode } from '@honest-health/platform/node';
import { honestHealthWithDevelopmentSandbox } from '../app/dev/sandbox.js';

await runOnNode(honestHealthWithDevelopmentSandbox);
