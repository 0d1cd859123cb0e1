import type { AppModule } from '@honest-health/platform';
import { loadNotesConfig, type NotesConfig } from './config.js';
import { COUNT_WORDS, countWords } from './count-words.js';
import { latestMigrationAt, schemaNeeds } from './migrations.gen.js';
import { noteRoutes } from './routes.js';

/** The notes app as the platform runs it, on every runtime: routes, one tick, no registries. */
export const notesApp: AppModule<NotesConfig> = {
  // Metrics notes_*, application_name notes:<pool>, service and tracer `notes`.
  identity: { name: 'notes' },
  loadConfig: loadNotesConfig,
  tickNames: [COUNT_WORDS],
  latestMigrationAt,
  schemaNeeds,
  create: async (config) => ({
    routes: noteRoutes(),
    ticks: [countWords(config.countWordsIntervalMs)],
    registries: [],
  }),
};
