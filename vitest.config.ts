import { configDefaults, defineConfig } from 'vitest/config';

// Two layers (docs/testing.md), and the platform's own suite. `npm test` runs them all; `npm run test:fast`
// only the first (the projects named fast*).
// - fast: pure logic and the app called in-process on PGlite. It spawns nothing, so it needs neither
//   the build nor the secret scan of spawned servers' logs that the global setup does.
// - integration: the process, cluster and Worker suites, which start Postgres clusters, child
//   servers, PgBouncer and workerd.
const FAST = 'test/fast/**/*.test.ts';
// Fast files share their workers' modules (isolate: false): importing hono, drizzle, pg and xero-node
// afresh for every file was most of the layer's time. A file that must see modules nobody else loaded
// runs in fast-isolated: validation-messages pins zod/mini's wording with no other module loaded that
// could set a zod locale for it, and other fast files load classic zod (the Xero sandbox does).
const FAST_ISOLATED = ['test/fast/validation-messages.test.ts'];
// Likewise for integration files: neon-proxy compares the Neon driver's own type parsing with pg's, and
// drizzle's neon-http driver, once any file built one, changes that parsing for the whole process
// (drizzle-orm/neon-http/driver.js, initMappers: timestamps and dates stay strings).
const INTEGRATION_ISOLATED = ['test/neon-proxy.test.ts'];

export default defineConfig({
  // The platform from its sources, by the tsconfig's paths (what tsc, tsx, Bun and esbuild read too).
  resolve: { tsconfigPaths: true },
  test: {
    // The run's own TMPDIR, checked empty at the end: no test leaves a temp file behind.
    globalSetup: ['test/support/temp-root.ts'],
    // A 2-core machine: two files at a time, across both projects.
    maxWorkers: 2,
    pool: 'forks',
    projects: [
      // The platform package's own tests (packages/platform/vitest.config.ts).
      'packages/platform',
      {
        test: {
          name: 'fast',
          include: [FAST],
          exclude: [...configDefaults.exclude, ...FAST_ISOLATED],
          isolate: false,
          // The first run on a machine builds the PGlite template (test/support/pglite-template.ts),
          // and a machine shared with other work runs PGlite several times slower than an idle one.
          hookTimeout: 60_000,
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'fast-isolated',
          include: FAST_ISOLATED,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, FAST, ...INTEGRATION_ISOLATED],
          globalSetup: ['test/support/global-setup.ts'],
          // Files share their workers' modules as the fast layer's do: a fresh import of the support
          // modules, pg, hono and the Xero sandbox for every file cost seconds each. Nothing in them
          // keeps state a later file could see (shared-postgres.ts drops a file's databases after it),
          // but for what INTEGRATION_ISOLATED's files look at.
          isolate: false,
          // Files start Postgres clusters and child servers: two files at a time keep a 2-core machine
          // responsive enough that timeouts mean something.
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        // Clusters of their own: neither the shared one nor the build of the global setup.
        test: {
          name: 'integration-isolated',
          include: INTEGRATION_ISOLATED,
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
