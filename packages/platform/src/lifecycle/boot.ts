import { errorCode, rootCause } from '../util/error-chain.js';
import type { Logger } from '../util/log.js';

export type StepKind = 'hard' | 'advisory';

export interface BootStep {
  name: string;
  kind: StepKind;
  run(): Promise<void> | void;
}

export class BootFailure extends Error {
  override name = 'BootFailure';
  constructor(
    readonly step: string,
    override readonly cause: unknown,
  ) {
    const code = errorCode(cause);
    const root = rootCause(cause);
    const message = root instanceof Error ? root.message : String(root);
    super(`boot failed at step "${step}": ${code ? `${code} ` : ''}${message}`, { cause });
  }
}

/** A signal arrived during boot: boot stops before the next step (and steps that watch the signal, at once). */
export class BootInterrupted extends Error {
  override name = 'BootInterrupted';
  constructor(readonly step: string) {
    super(`boot interrupted at step "${step}"`);
  }
}

export interface BootOptions {
  /** Aborted when boot must stop (SIGTERM/SIGINT during boot). */
  signal?: AbortSignal;
  /** Told which step is running, so a signal handler can name it. */
  onStep?(step: string): void;
}

/**
 * Runs the steps in order, logging each with its duration. An advisory step that fails is a warning;
 * a hard step that fails stops boot with a BootFailure naming the step (the caller exits).
 */
export async function runBoot(steps: BootStep[], log: Logger, options: BootOptions = {}): Promise<void> {
  const started = performance.now();
  const durations: Record<string, number> = {};
  for (const step of steps) {
    if (options.signal?.aborted) throw new BootInterrupted(step.name);
    options.onStep?.(step.name);
    const t0 = performance.now();
    try {
      await step.run();
      durations[step.name] = ms(t0);
      log.info('boot step', { step: step.name, kind: step.kind, ms: durations[step.name] });
    } catch (err) {
      durations[step.name] = ms(t0);
      if (options.signal?.aborted) throw new BootInterrupted(step.name);
      if (step.kind === 'advisory') {
        log.warn('boot step failed (advisory, continuing)', {
          step: step.name,
          ms: durations[step.name],
          err,
        });
        continue;
      }
      const failure = new BootFailure(step.name, err);
      log.error(failure.message, { step: step.name, ms: durations[step.name], err });
      throw failure;
    }
  }
  log.info('boot complete', { ms: ms(started), steps: durations });
}

const ms = (t0: number) => Math.round(performance.now() - t0);
