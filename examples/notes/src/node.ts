import { pgDatabase } from '@honest-health/platform/drivers/pg';
import { pgliteDatabase } from '@honest-health/platform/drivers/pglite';
import { runOnNode } from '@honest-health/platform/node';
import { notesProcess } from './process-module.js';

// The embedded PGlite without DATABASE_URL, node-postgres with one: the drivers this entry bundles.
// On Fly, each machine's id names the replica in heartbeats and tick records (else the host name).
await runOnNode(notesProcess, {
  databases: [pgliteDatabase, pgDatabase],
  instanceId: process.env.FLY_MACHINE_ID,
});
