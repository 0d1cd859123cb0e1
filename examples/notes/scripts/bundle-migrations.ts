// `npm run db:bundle`: drizzle/ (journal + SQL) -> src/migrations.gen.ts, by the platform's bundler.
// `--check` (`npm run db:bundle:check`) fails when the bundle is stale.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runMigrationsBundler } from '@honest-health/platform/tools';

await runMigrationsBundler(
  [
    {
      from: 'drizzle',
      out: 'src/migrations.gen.ts',
      generatedBy: 'scripts/bundle-migrations.ts',
      latestComment: 'The newest bundled migration: all a Worker, which only checks the schema, needs.',
    },
  ],
  { root: join(dirname(fileURLToPath(import.meta.url)), '..') },
);
