// The one export of toucan-js that error-tracking.ts uses. It imports this module lazily (only with a
// DSN), and a bundler must keep every export of a lazily imported module: importing toucan-js itself
// would put all of its integrations into the Worker bundle. Named here, the rest is tree-shaken.
export { Toucan } from 'toucan-js';
