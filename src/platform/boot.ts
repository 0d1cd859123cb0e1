import { errorCode, rootCause } from './error-chain.js';
import type { Logger } from './log.js';

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

/**
 * Runs the steps in order, logging each with its duration. An advisory step that fails is a warning;
 * a hard step that fails stops boot with a BootFailure naming the step (the caller exits).
 */
export async function runBoot(steps: BootStep[], log: Logger): Promise<void> {
  const started = performance.now();
  const durations: Record<string, number> = {};
  for (const step of steps) {
    const t0 = performance.now();
    try {
      await step.run();
      durations[step.name] = ms(t0);
      log.info('boot step', { step: step.name, kind: step.kind, ms: durations[step.name] });
    } catch (err) {
      durations[step.name] = ms(t0);
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
