import { defineConfig } from 'vitest/config';

// The example's own suites (`npm test` here, or the project `example` from the repository's root): each
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
