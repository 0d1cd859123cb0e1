export type { ProcessOptions } from '../lifecycle/process.js';
export { runOnNode } from '../runtimes/node.js';
