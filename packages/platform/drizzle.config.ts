import { defineConfig } from 'drizzle-kit';

// The platform's own tables, migrated apart from any app's: their own folder, their own table of
// applied migrations (db/migrate.ts applies them before the app's, under the same lock).
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/exports/schema.ts',
  out: './drizzle',
  migrations: { table: '__drizzle_migrations_platform', schema: 'drizzle' },
});
