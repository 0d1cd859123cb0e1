// The sandbox's notion of "now": an injectable base clock plus an offset the control API can push forward,
// so tests cross token expiries and grace windows without waiting. Timers (hangs, latency) stay real.

export class Clock {
  readonly #base: () => number;
  #offsetMs = 0;

  constructor(base: () => number = Date.now) {
    this.#base = base;
  }

  now(): number {
    return this.#base() + this.#offsetMs;
  }

  get offsetMs(): number {
    return this.#offsetMs;
  }

  /** Moves time forward (never back: expiry bookkeeping assumes a monotonic clock). Returns the new now. */
  advance(ms: number): number {
    if (!Number.isFinite(ms) || ms < 0)
      throw new RangeError(`advanceMs must be a finite number >= 0, got ${ms}`);
    this.#offsetMs += ms;
    return this.now();
  }

  reset(): void {
    this.#offsetMs = 0;
  }
}
