import { execFileSync } from 'node:child_process';

// Tests spawn the server the way a user runs it (`node dist/node.js`), so build it once per run.
export default function setup(): void {
  execFileSync(process.execPath, ['tools/build.mjs'], { stdio: 'inherit' });
}
