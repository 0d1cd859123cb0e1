import { expect } from 'vitest';
import type { ServerProcess } from './server.js';

/**
 * SIGINT during the embedded database's first start (in-memory PGlite runs initdb on every start,
 * blocking the event loop for seconds) must end the process at once, before the pool step. The same
 * check for the Node and the Bun entry.
 */
export async function expectFirstStartStoppedBySigint(server: ServerProcess): Promise<void> {
  try {
    await server.waitForLog((l) => l.msg === 'boot step' && l.step === 'error tracking');
    await new Promise((r) => setTimeout(r, 300));
    const sent = Date.now();
    server.kill('SIGINT');
    const code = await server.exited;
    // Killed by the signal itself (a shell reports 130) or, if the start was not blocking, exit 130.
    expect(code === 130 || server.child.signalCode === 'SIGINT').toBe(true);
    expect(Date.now() - sent).toBeLessThan(2000);
    expect(server.logs.some((l) => l.msg === 'boot step' && l.step === 'open pool')).toBe(false);
  } finally {
    server.kill('SIGKILL');
  }
}
