import type { ReadinessGate } from '../http/gate.js';
import type { Logger } from '../util/log.js';
import { withTimeout } from '../util/timeout.js';

export interface ShutdownStage {
  name: string;
  run(budgetMs: number): Promise<void>;
}

export interface ShutdownOptions {
  gate: ReadinessGate;
  log: Logger;
  /** Budget for all stages together; a stage that overruns is abandoned and the next one runs. */
  timeoutMs: number;
  stages: ShutdownStage[];
  exit(code: number): void;
}

/**
 * Returns the signal handler. The first signal closes the gate at once (readiness turns 503
 * `draining` while requests still complete), then runs the stages in order and exits 0.
 * A second signal exits at once.
 */
export function createShutdown(options: ShutdownOptions): (signal: string) => Promise<void> {
  const { gate, log, timeoutMs, stages, exit } = options;
  let shuttingDown = false;
  return async (signal) => {
    if (shuttingDown) {
      log.warn('second signal: exiting without draining', { signal });
      exit(1);
      return;
    }
    shuttingDown = true;
    gate.drain();
    log.info('shutdown started', { signal, timeout_ms: timeoutMs });
    const started = performance.now();
    for (const stage of stages) {
      const budget = Math.max(0, timeoutMs - (performance.now() - started));
      const t0 = performance.now();
      try {
        // Past the budget each stage still gets a second: ending pools cleanly is cheap and worth it.
        await withTimeout(stage.run(budget), Math.max(budget, 1000), `shutdown stage ${stage.name}`);
        log.info('shutdown stage', { stage: stage.name, ms: Math.round(performance.now() - t0) });
      } catch (err) {
        log.warn('shutdown stage did not finish', { stage: stage.name, err });
      }
    }
    log.info('shutdown complete', { ms: Math.round(performance.now() - started) });
    exit(0);
  };
}

/**
 * Exit status of a boot stopped by a signal before it ever served: 128 + the signal's number
 * (130 SIGINT, 143 SIGTERM), which is also what a shell reports for a process the signal killed.
 * Distinct from 0 (drained after serving) and 1 (a hard boot step failed).
 */
export const BOOT_INTERRUPTED_EXIT_CODES: Readonly<Record<string, number>> = { SIGINT: 130, SIGTERM: 143 };

export const bootInterruptedExitCode = (signal: string): number => BOOT_INTERRUPTED_EXIT_CODES[signal] ?? 1;
