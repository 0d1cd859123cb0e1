// The one walk over what an error wraps: the log's summary, the poison classifier, error codes and
// boot failures all read errors through causeChain(). Drizzle wraps driver errors
// (DrizzleQueryError), so what matters usually sits on `cause`.

const MAX_DEPTH = 8;
const MAX_NODES = 32;

/** Which wrapped errors a walk follows from one error. */
export type Links = (e: object) => readonly unknown[];

/** Only `cause`, and only of Errors: the chain Drizzle, pg-pool and fetch build. */
export const viaCause: Links = (e) => (e instanceof Error ? [e.cause] : []);

/**
 * Everywhere a driver hides the error it wraps: `cause` (on any object), `sourceError` (NeonDbError),
 * `errors` (AggregateError: localhost tries ::1 and 127.0.0.1), `error` (ws's ErrorEvent).
 */
export const viaAnyWrapper: Links = (e) => {
  const { cause, sourceError, errors, error } = e as Record<string, unknown>;
  return [cause, sourceError, ...(Array.isArray(errors) ? errors : []), error];
};

/** How far `causeChain` walks an error's causes, and by which links. */
export interface WalkOptions {
  /** viaCause unless told. */
  links?: Links;
  /** Levels, the error itself being the first: MAX_DEPTH (8) unless told. */
  maxDepth?: number;
}

/**
 * `err` and every error it wraps, outermost first (breadth first, so along a plain cause chain in
 * order). Bounded: at most `maxDepth` levels and MAX_NODES objects. Cycle-safe: an object is
 * visited once however the chain loops back. undefined and null are skipped, not yielded.
 */
export function* causeChain(err: unknown, options: WalkOptions = {}): Generator<unknown> {
  const { links = viaCause, maxDepth = MAX_DEPTH } = options;
  const seen = new Set<object>();
  let level: readonly unknown[] = [err];
  for (let depth = 0; depth < maxDepth && level.length > 0; depth++) {
    const next: unknown[] = [];
    for (const e of level) {
      if (e === undefined || e === null) continue;
      if (typeof e === 'object') {
        if (seen.has(e) || seen.size >= MAX_NODES) continue;
        seen.add(e);
      }
      yield e;
      if (typeof e === 'object') next.push(...links(e));
    }
    level = next;
  }
}

/** The first string `code` along the cause chain: a SQLSTATE or an errno code such as ECONNREFUSED. */
export function errorCode(err: unknown): string | undefined {
  for (const e of causeChain(err)) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

/** The innermost error: the driver's own message rather than the wrapper's query text. */
export function rootCause(err: unknown): unknown {
  let last: unknown = err;
  for (const e of causeChain(err)) last = e;
  return last;
}
