// What the notes example's suites share: where the example lives and how to run its TypeScript.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

export const exampleRoot = join(dirname(fileURLToPath(import.meta.url)), '..');
/** tsx from the workspace root: the platform's exports are TypeScript sources, as the example's are. */
export const tsx = join(exampleRoot, '../../node_modules/.bin/tsx');

export interface Note {
  id: string;
  body: string;
  words: number | null;
}

export const postNote = (base: string, body: unknown, init: RequestInit = {}) =>
  fetch(`${base}/notes`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    ...init,
  });

/** A query on its own connection: the test's view of the database, beside the app's pools. */
export async function query<R extends pg.QueryResultRow>(url: string, text: string, params: unknown[] = []) {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return (await client.query<R>(text, params)).rows;
  } finally {
    await client.end();
  }
}

/** How many write probes an instance has recorded: each `/readyz` that proved a write is one more. */
export const beats = async (url: string, instanceId: string) =>
  (
    await query<{ n: number }>(
      url,
      'SELECT coalesce(sum(beats), 0)::int AS n FROM health_heartbeat WHERE instance_id = $1',
      [instanceId],
    )
  )[0]?.n ?? 0;
