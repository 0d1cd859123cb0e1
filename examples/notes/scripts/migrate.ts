// `npm run db:migrate`: applies the bundled migrations to DATABASE_URL under the platform's advisory
// lock. A Worker only checks the schema, so this runs at deploy, outside it (`npm run deploy:workers`).
import { createLogger, loadConfig } from '@honest-health/platform';
import { pgDatabase } from '@honest-health/platform/drivers/pg';
import { migrateAtDeploy } from '@honest-health/platform/tools';
import { migrations } from '../src/migrations.gen.js';
import { notesApp } from '../src/module.js';

if (!process.env.DATABASE_URL) {
  // Without it this would migrate the embedded database, which a process migrates at boot anyway.
  console.error('usage: DATABASE_URL=postgres://... npm run db:migrate');
  process.exit(2);
}
const config = loadConfig(process.env);
// node-postgres over a session: the migration's transaction holds the advisory lock.
const result = await migrateAtDeploy(config, createLogger(config.logLevel), {
  databases: [pgDatabase],
  identity: notesApp.identity,
  migrations,
});
console.log(JSON.stringify(result));
