export {
  createIsolateHandlers,
  type ExecutionContextLike,
  type IsolateOptions,
} from '../lifecycle/isolate.js';
export type { Bindings, IsolateDatabase } from '../lifecycle/isolate-database.js';
export { type IsolateErrorTracking, tailErrorTracking } from '../lifecycle/isolate-errors.js';
