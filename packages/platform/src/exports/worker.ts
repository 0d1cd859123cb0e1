export {
  createIsolateHandlers,
  type ExecutionContextLike,
  type IsolateOptions,
} from '../runtimes/worker.js';
export type { Bindings, IsolateDatabase } from '../runtimes/worker-database.js';
export { type IsolateErrorTracking, tailErrorTracking } from '../runtimes/worker-errors.js';
