/**
 * A tick scheduled while the same tick runs in this isolate runs once more right after, as the
 * process scheduler's trigger does: the run in flight may have claimed before the new work existed.
 * However many ask meanwhile, one follow-up is queued, and each of them waits for it.
 */
export class FollowUpRuns {
  readonly #inFlight = new Map<string, Promise<void>>();
  readonly #queued = new Map<string, Promise<void>>();

  /** Starts `run` now, or after the run in flight; resolves when the run that covers this call is done. */
  schedule(name: string, run: () => Promise<unknown>): Promise<void> {
    const queued = this.#queued.get(name);
    if (queued) return queued;
    const current = this.#inFlight.get(name);
    if (!current) return this.#start(name, run);
    const next = current.then(() => {
      this.#queued.delete(name);
      return this.#start(name, run);
    });
    this.#queued.set(name, next);
    return next;
  }

  #start(name: string, run: () => Promise<unknown>): Promise<void> {
    const started: Promise<void> = run()
      .then(
        () => {},
        () => {},
      )
      .finally(() => {
        if (this.#inFlight.get(name) === started) this.#inFlight.delete(name);
      });
    this.#inFlight.set(name, started);
    return started;
  }
}
