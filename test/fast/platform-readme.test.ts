// The platform's README shows runnable code: each of its code blocks whose first line names a file
// (`// src/server.ts: ...`) is written to that file in a consumer of the package, and the consumer
// type-checks with the repository's settings (strict) against the package's public entries.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/server.js';

const README = join(repoRoot, 'packages/platform/README.md');

/** The README's code blocks that name their file: path -> code. */
function snippets(markdown: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const [, code] of markdown.matchAll(/```(?:ts|js)\n([\s\S]*?)```/g)) {
    const file = /^\/\/ ((?:src|scripts)\/[\w./-]+\.(?:ts|mjs))\b/.exec(code as string)?.[1];
    if (file) files.set(file, code as string);
  }
  return files;
}

describe("the platform's README", () => {
  it('type-checks every code block that names its file, the whole shell and the single middleware', () => {
    const files = snippets(readFileSync(README, 'utf8'));
    expect([...files.keys()]).toEqual(
      expect.arrayContaining([
        'src/module.ts',
        'src/node.ts',
        'src/worker.ts',
        'src/server.ts',
        'scripts/build.mjs',
      ]),
    );
    const dir = mkdtempSync(join(tmpdir(), 'platform-readme-'));
    try {
      symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'));
      // The snippets are an app's ESM modules: relative imports name `.js`, top-level await.
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
      for (const [file, code] of files) {
        mkdirSync(dirname(join(dir, file)), { recursive: true });
        writeFileSync(join(dir, file), code);
      }
      // The repository's settings and paths (the package's entries, from its sources), these files only.
      writeFileSync(
        join(dir, 'tsconfig.json'),
        JSON.stringify({
          extends: join(repoRoot, 'tsconfig.json'),
          compilerOptions: { allowJs: true, checkJs: true },
          include: [...files.keys()],
          exclude: [],
        }),
      );
      let out = '';
      try {
        execFileSync(join(repoRoot, 'node_modules/.bin/tsc'), ['-p', dir], {
          encoding: 'utf8',
          stdio: 'pipe',
        });
      } catch (err) {
        out = String((err as { stdout?: string }).stdout ?? err);
      }
      expect(out).toBe('');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
