// Drizzle wraps driver errors (DrizzleQueryError), so what matters sits on `cause`.

const MAX_DEPTH = 8;

export function* causeChain(err: unknown): Generator<unknown> {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < MAX_DEPTH; depth++) {
    yield e;
    e = e instanceof Error ? e.cause : undefined;
  }
}

/** The first string `code` along the cause chain: a SQLSTATE or an errno code such as ECONNREFUSED. */
export function errorCode(err: unknown): string | undefined {
  for (const e of causeChain(err)) {
    const code = (e as { code?: unknown } | null)?.code;
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
