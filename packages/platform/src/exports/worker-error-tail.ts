export { createErrorTail, type TraceItemLike } from '../runtimes/worker-error-tail.js';
