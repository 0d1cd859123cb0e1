import { runOnNode } from '@honest-health/platform/node';
import { notesProcess } from './process-module.js';

await runOnNode(notesProcess);
