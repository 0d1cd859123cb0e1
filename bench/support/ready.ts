// Polls an HTTP endpoint until it answers 200, the way an orchestrator's readiness check would.

export interface PollOptions {
  /** Pause between attempts. */
  intervalMs?: number;
  timeoutMs?: number;
  /** Resolves when the target process has exited: polling stops at once instead of timing out. */
  exited?: Promise<unknown>;
  /** Appended to the error message (e.g. the process's logs). */
  describe?: () => string;
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** Resolves with the number of attempts once `url` answers 200. */
export async function pollUntil200(url: string, options: PollOptions = {}): Promise<number> {
  const { intervalMs = 20, timeoutMs = 60_000, exited, describe = () => '' } = options;
  let gone = false;
  void exited?.then(() => {
    gone = true;
  });
  const deadline = performance.now() + timeoutMs;
  let last = 'no answer';
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.status === 200) return attempt;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = (err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : String(err);
    }
    if (gone) throw new Error(`${url}: process exited before answering 200 (last: ${last})\n${describe()}`);
    if (performance.now() > deadline)
      throw new Error(`${url}: no 200 in ${timeoutMs} ms (last: ${last})\n${describe()}`);
    await sleep(intervalMs);
  }
}
