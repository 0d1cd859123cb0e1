// Why a pool is thrown away, as a value the log and the metrics read directly rather than parse a
// sentence back by its prefix. Logs carry the sentence too.

/** What was running when it met a poisoned pool: a request, a tick, or other background work. */
export type PoisonedWork = { source: 'request' } | { source: 'tick' | 'background'; name: string };

/** Who asked for the disposal and why: the probe found the database read-only, or work met poison. */
export type DisposalCause = { source: 'probe'; reason: 'read_only' } | (PoisonedWork & { reason: string });

export const PROBE_READ_ONLY: DisposalCause = { source: 'probe', reason: 'read_only' };

/** The work in words, for log lines: "request", "tick expire-carts", "api-key registry refresh". */
export function describeWork(work: PoisonedWork): string {
  if (work.source === 'request') return 'request';
  return work.source === 'tick' ? `tick ${work.name}` : work.name;
}

/** The cause in words, for log lines: "probe read_only", "poison in tick expire-carts: 25006". */
export function describeDisposal(cause: DisposalCause): string {
  if (cause.source === 'probe') return `probe ${cause.reason}`;
  return `poison in ${describeWork(cause)}: ${cause.reason}`;
}
