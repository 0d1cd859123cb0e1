import { defineConfig } from 'vitest/config';

// The package's own tests: pure logic and small real sockets, no database server, no build. The root
// `npm test` runs them as the project `fast-platform` (so `npm run test:fast` does too); here alone:
// `npm test -w @honest-health/platform`.
export default defineConfig({
  test: {
    name: 'fast-platform',
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    // The files share their workers' modules, as the root's fast layer does.
    isolate: false,
    testTimeout: 20_000,
  },
});
