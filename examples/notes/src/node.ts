import { pgDatabase } from '@honest-health/platform/drivers/pg';
import { pgliteDatabase } from '@honest-health/platform/drivers/pglite';
import { runOnNode } from '@honest-health/platform/node';
import { notesProcess } from './process-module.js';

// The embedded PGlite without DATABASE_URL, node-postgres with one: the drivers this entry bundles.
await runOnNode(notesProcess, { databases: [pgliteDatabase, pgDatabase] });
