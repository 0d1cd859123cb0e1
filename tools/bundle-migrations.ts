// `npm run db:bundle`: each drizzle-kit folder bundled into the module a runtime imports its
// migrations from (the platform's bundler): the platform's own (packages/platform/drizzle/) and the
// app's (drizzle/). `--check` fails when a bundle is stale.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type MigrationsBundle, readMigrations, runMigrationsBundler } from '@honest-health/platform/tools';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const GENERATED_BY = 'tools/bundle-migrations.ts';

const PLATFORM: MigrationsBundle = {
  from: 'packages/platform/drizzle',
  out: 'packages/platform/src/db/migrations.gen.ts',
  generatedBy: GENERATED_BY,
  typeFrom: './migrate.js',
  names: {
    migrations: 'platformMigrations',
    latest: 'latestPlatformMigrationAt',
    needs: 'platformSchemaNeeds',
  },
};

// The platform's tables were the app's before the platform migrated them (drizzle/0000_init.sql and
// 0004_tick_health.sql). The platform creates them first now, so on a new database the app's old
// CREATE TABLE of one is bundled as CREATE TABLE IF NOT EXISTS: the same table, the files and their
// hashes untouched, and on every database the old statement has already run on, nothing runs again.
const platformTables = new Set(
  readMigrations(join(root, PLATFORM.from))
    .flatMap((m) => m.statements.flatMap((s) => [...s.matchAll(/CREATE TABLE IF NOT EXISTS "(\w+)"/g)]))
    .map((m) => m[1]),
);
const APP: MigrationsBundle = {
  from: 'drizzle',
  out: 'src/app/migrations.gen.ts',
  generatedBy: GENERATED_BY,
  rewrite: (statement) =>
    statement.replace(/^CREATE TABLE "(\w+)"/, (whole, table: string) =>
      platformTables.has(table) ? `CREATE TABLE IF NOT EXISTS "${table}"` : whole,
    ),
};

await runMigrationsBundler([PLATFORM, APP], { root });
