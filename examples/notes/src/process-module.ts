import type { ProcessAppModule } from '@honest-health/platform';
import type { NotesConfig } from './config.js';
import { migrations } from './migrations.gen.js';
import { notesApp } from './module.js';

/** What a process runs: the module plus the migrations boot applies (a Worker's bundle leaves them out). */
export const notesProcess: ProcessAppModule<NotesConfig> = { ...notesApp, migrations };
