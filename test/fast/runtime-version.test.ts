import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// Node 20 is end of life; the project pins Node 24 as a devDependency so every npm script (tests
// included) runs on it whatever the machine's own Node is.
const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
};
const major = (version: string) => Number(version.replace(/^v/, '').split('.')[0]);

describe('the Node the tests run on', () => {
  it('is Node 24 or newer', () => {
    expect(major(process.versions.node)).toBeGreaterThanOrEqual(24);
  });

  it('is the pinned `node` devDependency, which .node-version names too', () => {
    const pinned = pkg.devDependencies.node ?? '';
    expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
    expect(process.versions.node).toBe(pinned);
    expect(readFileSync('.node-version', 'utf8').trim()).toBe(String(major(pinned)));
    expect(pkg.engines.node).toBe('>=22.12');
  });
});
