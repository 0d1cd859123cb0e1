// The operator's commands (cli/org.ts, migrate.ts, tokens.ts) bundled by the platform's build, as
// `npm run build` bundles the server: the same sources, started as plain `node <bundle>` without tsx
// compiling the app's module graph again at every start. A test of how `npm run` itself starts them
// spawns tsx (cli.test.ts does, once per command).
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { buildNodeApp } from '@honest-health/platform/build';
import { EMBEDDED_NODE_FLAGS, repoRoot } from './server.js';

export type Tool = 'org' | 'migrate' | 'tokens';

export interface ToolRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface ToolsBundle {
  /** Runs `node <embedded flags> <bundle>/<tool>.js args` (as `npm run` would, but for tsx) with only PATH and `env`. */
  run(tool: Tool, args: string[], options: { cwd: string; env?: Record<string, string> }): Promise<ToolRun>;
  remove(): void;
}

export function runFile(
  file: string,
  args: string[],
  options: { cwd: string; env?: Record<string, string> },
): Promise<ToolRun> {
  return new Promise((done) => {
    execFile(
      file,
      args,
      { cwd: options.cwd, env: { PATH: process.env.PATH, ...options.env }, timeout: 60_000 },
      (err, stdout, stderr) =>
        done({ code: err ? ((err as { code?: number }).code ?? null) : 0, stdout, stderr }),
    );
  });
}

export async function bundleTools(): Promise<ToolsBundle> {
  // Inside the repository, so the bundles' external packages resolve from its node_modules.
  const dir = mkdtempSync(join(repoRoot, 'node_modules/.cache-tools-bundle-'));
  await buildNodeApp({
    root: repoRoot,
    entryPoints: { org: 'cli/org.ts', migrate: 'cli/migrate.ts', tokens: 'cli/tokens.ts' },
    outdir: dir,
  });
  return {
    run: (tool, args, options) =>
      runFile(process.execPath, [...EMBEDDED_NODE_FLAGS, join(dir, `${tool}.js`), ...args], options),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
