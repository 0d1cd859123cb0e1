// Everything a benchmark starts is stopped in reverse order on the way out, errors included; temp
// directories go even on SIGINT/SIGTERM. Child processes and clusters have exit hooks of their own in
// the test harness, so on a signal exiting is enough.
import { mkdtempSync, rmSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { progress } from './report.js';

const steps: Array<{ name: string; run: () => Promise<unknown> }> = [];
const tempDirs = new Set<string>();

/** Registers `run` to stop `name` when the benchmark ends (or fails). */
export function track(name: string, run: () => Promise<unknown>): void {
  steps.push({ name, run });
}

/** Takes `name` off the list without running it: the caller stops it itself. */
export function forget(name: string): void {
  const at = steps.findIndex((s) => s.name === name);
  if (at !== -1) steps.splice(at, 1);
}

/** Stops `name` now, if it is still on the list. */
export async function untrack(name: string): Promise<void> {
  const at = steps.findIndex((s) => s.name === name);
  if (at === -1) return;
  const [step] = steps.splice(at, 1);
  await step?.run();
}

export async function cleanupAll(): Promise<void> {
  while (steps.length > 0) {
    const step = steps.pop();
    await step?.run().catch((err) => progress(`cleanup "${step.name}" failed: ${(err as Error).message}`));
  }
}

/** A fresh directory under the system's temp dir, removed on exit unless removed earlier. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

export function removeTempDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  tempDirs.delete(dir);
}

/** Runs a benchmark's main: on the way out, whatever happened, everything tracked is stopped. */
export async function runBench(main: () => Promise<void>): Promise<void> {
  process.on('exit', () => {
    for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      progress(`${signal}: cleaning up`);
      process.exit(128 + constants.signals[signal]);
    });
  }
  try {
    await main();
  } catch (err) {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exitCode = 1;
  } finally {
    await cleanupAll();
  }
}
