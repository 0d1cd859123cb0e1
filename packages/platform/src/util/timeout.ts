/** The work did not finish in time (`withTimeout`). */
export class TimeoutError extends Error {
  override name = 'TimeoutError';
}

/**
 * Rejects with TimeoutError after `ms`; the work itself is not cancelled, only no longer awaited.
 *
 * @example
 * ```ts
 * const rows = await withTimeout(readGauges(db), config.probeTimeoutMs, 'queue depth');
 * ```
 */
export async function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`${what} took longer than ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
