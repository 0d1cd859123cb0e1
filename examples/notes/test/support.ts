// What the notes example's suites share: where the example lives and how to run its TypeScript.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

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
