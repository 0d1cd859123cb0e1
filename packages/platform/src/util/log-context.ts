import { AsyncLocalStorage } from 'node:async_hooks';
import type { LogFields } from './log.js';

// Fields that every log line written while `fn` runs carries (a request id, a tick's name and run id),
// however deep the call and whichever logger writes it: route handlers and ticks keep the logger they
// were built with and still log the right request. AsyncLocalStorage runs on Node, Bun and Workers
// (nodejs_compat).
const store = new AsyncLocalStorage<LogFields>();

export function withLogContext<T>(fields: LogFields, fn: () => T): T {
  const outer = store.getStore();
  return store.run(outer ? { ...outer, ...fields } : fields, fn);
}

/**
 * Like withLogContext, but drops the fields `fn` was called under. A timer inherits the context it was
 * set in: a loop that a request triggered must not carry that request's id into every later run.
 */
export function withFreshLogContext<T>(fields: LogFields, fn: () => T): T {
  return store.run(fields, fn);
}

export function logContext(): LogFields | undefined {
  return store.getStore();
}
