/**
 * A tick scheduled while the same tick runs in this isolate runs once more right after, as the
 * process scheduler's trigger does: the run in flight may have claimed before the new work existed.
 * However many ask meanwhile, one follow-up is queued, and each of them waits for it.
 */
export class FollowUpRuns {
  readonly #inFlight = new Map<string, Promise<void>>();
  /** The run queued behind the one in flight, and whether it is a cron's own (scheduleOwn). */
  readonly #queued = new Map<string, { done: Promise<void>; own: boolean }>();

  /** Starts `run` now, or after the run in flight; resolves when the run that covers this call is done. */
  schedule(name: string, run: () => Promise<unknown>): Promise<void> {
    return this.#queued.get(name)?.done ?? this.#after(this.#inFlight.get(name), name, run, false);
  }

  /**
   * Starts `run` now, or after the runs in flight and queued, as a run of its own: a cron invocation's,
   * which must not be lost to a run that claimed before it fired (the next cron is a minute away), and
   * reports its own check-in. A cron's run already queued covers this one (it starts after this call),
   * so runs slower than the cron queue one, not one per cron. Calls to schedule() meanwhile wait for it.
   */
  scheduleOwn(name: string, run: () => Promise<unknown>): Promise<void> {
    const queued = this.#queued.get(name);
    if (queued?.own) return queued.done;
    return this.#after(queued?.done ?? this.#inFlight.get(name), name, run, true);
  }

  #after(
    ahead: Promise<void> | undefined,
    name: string,
    run: () => Promise<unknown>,
    own: boolean,
  ): Promise<void> {
    if (!ahead) return this.#start(name, run);
    const queued = {
      own,
      done: ahead.then(() => {
        if (this.#queued.get(name) === queued) this.#queued.delete(name);
        return this.#start(name, run);
      }),
    };
    this.#queued.set(name, queued);
    return queued.done;
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
