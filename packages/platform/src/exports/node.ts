export { runOnNode } from '../runtimes/node.js';
