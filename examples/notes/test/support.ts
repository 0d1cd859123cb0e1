// What the notes example's suites share: where the example lives and how to run its TypeScript. The
// example's tests need nothing of the repository around it (test/postgres.ts, test/server.ts): copied
// out with the platform installed from its tarball, `npm test` runs them as they are.
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

export const exampleRoot = join(dirname(fileURLToPath(import.meta.url)), '..');

const require = createRequire(import.meta.url);
const tsxManifest = require.resolve('tsx/package.json');
const tsxCli = join(dirname(tsxManifest), JSON.parse(readFileSync(tsxManifest, 'utf8')).bin as string);

/** The nearest tsconfig.json at or above `dir`. */
function tsconfigAbove(dir: string): string | undefined {
  for (let at = dir; ; at = dirname(at)) {
    if (existsSync(join(at, 'tsconfig.json'))) return join(at, 'tsconfig.json');
    if (dirname(at) === at) return undefined;
  }
}
// tsx reads the tsconfig.json of its working directory, and the servers here run in temporary ones: it
// is named. In the repository that is the workspace's, whose paths lead the platform to its sources;
// copied out there is none, and the platform is its installed build.
const tsconfig = tsconfigAbove(exampleRoot);

/**
 * A TypeScript file run by tsx, on this Node: the command and its arguments. With `npm run dev`'s
 * flags: PGlite's wasm on V8's baseline compiler, whose optimizing tier costs a short-lived process
 * more CPU than it saves.
 */
export const tsx = (file: string, ...args: string[]): { command: string; args: string[] } => ({
  command: process.execPath,
  args: [
    tsxCli,
    '--no-wasm-tier-up',
    '--no-wasm-dynamic-tiering',
    ...(tsconfig ? ['--tsconfig', tsconfig] : []),
    file,
    ...args,
  ],
});

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
