import { DatabaseUnavailableError } from '../db/poison-retry.js';
import type { Logger } from '../util/log.js';
import { withFreshLogContext } from '../util/log-context.js';

export interface Loop {
  name: string;
  intervalMs: number;
  run(): Promise<void>;
}

/**
 * In-process loops for Node and Bun (Workers use cron triggers instead). A loop's next run is
 * scheduled only after the current one settles, so runs never overlap; stop() awaits the runs
 * in progress so shutdown never cuts a tick in half.
 */
export class Scheduler {
  readonly #loops: Loop[] = [];
  readonly #timers = new Map<string, ReturnType<typeof setTimeout>>();
  readonly #running = new Map<string, Promise<void>>();
  readonly #again = new Set<string>();
  #stopped = false;
  #started = false;

  constructor(private readonly log: Logger) {}

  register(loop: Loop): void {
    this.#loops.push(loop);
  }

  start(): void {
    this.#started = true;
    for (const loop of this.#loops) this.#schedule(loop);
  }

  /**
   * Runs a loop now instead of at its next interval (new work arrived). If it is running, it runs
   * once more right after, so work that arrived mid-run is not left for a whole interval.
   */
  trigger(name: string): void {
    const loop = this.#loops.find((l) => l.name === name);
    if (!loop || !this.#started || this.#stopped) return;
    if (this.#running.has(name)) {
      this.#again.add(name);
      return;
    }
    clearTimeout(this.#timers.get(name));
    this.#schedule(loop, 0);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const timer of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    await Promise.allSettled(this.#running.values());
  }

  #schedule(loop: Loop, delayMs?: number): void {
    if (this.#stopped) return;
    // ±10% jitter keeps replicas started together from ticking in lockstep.
    const delay = delayMs ?? loop.intervalMs * (0.9 + Math.random() * 0.2);
    const timer = setTimeout(() => {
      this.#timers.delete(loop.name);
      // Lines logged by the run name the loop (ticks add their own name and run id), and only the loop:
      // when a request triggered it, this timer was set inside that request's context.
      const run = withFreshLogContext({ loop: loop.name }, () => loop.run())
        .catch((err: unknown) => {
          // A failover is routine: the work runs again next interval, and the episode has warned.
          if (err instanceof DatabaseUnavailableError) {
            this.log.warn('loop run failed: database unavailable', { loop: loop.name, reason: err.reason });
          } else this.log.error('loop run failed', { loop: loop.name, err });
        })
        .finally(() => {
          this.#running.delete(loop.name);
          const again = this.#again.delete(loop.name);
          this.#schedule(loop, again ? 0 : undefined);
        });
      this.#running.set(loop.name, run);
    }, delay);
    // A pending timer must not keep a process alive that is otherwise done.
    (timer as { unref?: () => void }).unref?.();
    this.#timers.set(loop.name, timer);
  }
}
