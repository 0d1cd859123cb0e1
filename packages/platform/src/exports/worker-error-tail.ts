export { createErrorTail, type TraceItemLike } from '../lifecycle/error-tail.js';
