// An invoice without tenantId and a new default at the same instant, on a real Postgres: an insert
// that finds no default reads it again FOR SHARE (src/app/invoices/store.ts), so
// POST /api/connections/{id}/default waits for it, and its binding of waiting pushes then sees it.
// Without that lock the binding's snapshot misses the uncommitted insert, and the invoice waits for
// a default the organization already has. An insert that found a default takes no lock.

import type { Database } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import type { DatabaseHandle } from '@honest-health/platform/db';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { chooseConnection } from '../src/app/connections/choose.js';
import { createPush } from '../src/app/invoices/store.js';
import { migratedDatabase } from './support/databases.js';
import { invoiceBody } from './support/orgs.js';
import type { Cluster } from './support/postgres.js';
import { sharedCluster } from './support/shared-postgres.js';
import {
  captureLog,
  connectedGrant,
  connectedOrganization,
  openDatabase,
  type Sandbox,
  testBox,
} from './support/ticks.js';

let cluster: Cluster;
let sandbox: Sandbox;
let url: string;
let handle: DatabaseHandle;
let box: SecretBox;

beforeAll(async () => {
  [cluster, sandbox] = await Promise.all([sharedCluster(), startXeroSandbox({ port: 0 })]);
  url = await migratedDatabase(cluster);
  handle = await openDatabase(url, captureLog().log);
  box = await testBox();
});
afterAll(async () => {
  await handle?.close();
  await sandbox?.close();
  await cluster?.remove();
});

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/**
 * Runs `during` while an invoice of `organizationId` is inserted but not committed, in a transaction
 * of its own; `commit` ends it. Rolled back if `during` ends without committing.
 */
async function withUncommittedInsert(
  organizationId: string,
  key: string,
  during: (
    push: Awaited<ReturnType<typeof createPush>>['push'],
    commit: () => Promise<void>,
  ) => Promise<void>,
): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('BEGIN');
    const inFlight = drizzle({ client }) as unknown as Database;
    const input = { tenantId: undefined, payloadText: JSON.stringify(invoiceBody()) };
    const { push } = await createPush(inFlight, organizationId, key, input, 'hash');
    await during(push, async () => {
      await client.query('COMMIT');
    });
  } finally {
    await client.query('ROLLBACK').catch(() => {});
    await client.end();
  }
}

describe('an invoice and a new default at the same instant', () => {
  it('the default waits for the insert that found none, then binds it', async () => {
    const { org, connectionId } = await connectedOrganization(handle.db, box, sandbox, 'Race Ltd', {
      chosen: 'none',
    });
    await withUncommittedInsert(org.id, 'race-1', async (push, commit) => {
      expect(push.status).toBe('awaiting_connection');

      let settled = false;
      const choosing = chooseConnection(handle.db, org.id, connectionId, true).finally(() => {
        settled = true;
      });
      await sleep(500);
      expect(settled, 'the default waited for the uncommitted insert').toBe(false);
      await commit();

      expect((await choosing)?.queued).toBe(1);
      const { rows } = await handle.pool.query(
        'SELECT status, connection_id FROM invoice_pushes WHERE id = $1',
        [push.id],
      );
      expect(rows[0]).toEqual({ status: 'queued', connection_id: connectionId });
    });
  });

  it('an insert that found a default takes no lock: a new default does not wait for it', async () => {
    const { org, connectionIds } = await connectedGrant(handle.db, box, sandbox, 'Two Books Ltd', 2);
    const [first, second] = connectionIds as [string, string];
    await withUncommittedInsert(org.id, 'no-wait-1', async (push, commit) => {
      expect(push.status).toBe('queued');

      const chosen = await Promise.race([
        chooseConnection(handle.db, org.id, second, true),
        sleep(2000).then(() => 'waited' as const),
      ]);
      expect(chosen, 'the new default did not wait for the uncommitted insert').not.toBe('waited');
      await commit();
      // It went where the default was when it arrived.
      const { rows } = await handle.pool.query('SELECT connection_id FROM invoice_pushes WHERE id = $1', [
        push.id,
      ]);
      expect(rows[0]).toEqual({ connection_id: first });
    });
  });
});
