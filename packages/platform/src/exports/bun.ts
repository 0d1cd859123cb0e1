export { runOnBun } from '../runtimes/bun.js';
