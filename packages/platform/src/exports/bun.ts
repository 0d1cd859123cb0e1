export type { ProcessOptions } from '../lifecycle/process.js';
export { runOnBun } from '../runtimes/bun.js';
