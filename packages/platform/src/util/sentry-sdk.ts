// What error-tracking.ts uses of Sentry's SDK, in one module it imports lazily (only with a DSN): a
// bundler keeps every export of a lazily imported module, so naming the few used here leaves the
// rest of the SDK out. `CloudflareClient` is @sentry/cloudflare's client on @sentry/core's
// ServerRuntimeClient, built by hand: it runs on Node and Bun as well (fetch transport, V8 stacks),
// without `withSentry`'s instrumentation.
export {
  CloudflareClient,
  createTransport,
  functionToStringIntegration,
  linkedErrorsIntegration,
  Scope,
} from '@sentry/cloudflare';
export { createStackParser } from '@sentry/core';
export { nodeStackLineParser } from '@sentry/core/server';
