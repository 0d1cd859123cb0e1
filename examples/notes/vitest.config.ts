import { defineConfig } from 'vitest/config';

// The example's own suites (`npm test` here; the repository's `npm test` runs them from the packed platform
// in a copy outside the repository, test/platform-tarball.test.ts): each
// boots the app on Node and in workerd against a throwaway Postgres cluster of its own.
export default defineConfig({
  test: {
    name: 'example',
    include: ['test/**/*.test.ts'],
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
