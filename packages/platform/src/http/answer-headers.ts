import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';

// Headers every answer to a request carries (its id, an API's cache and sniffing rules), declared by
// middleware before the handler runs. A handler that answers with `jsonAnswer` builds its Response
// with them already in, as a plain object: @hono/node-server writes such an object as it is
// (responseViaCache), where a header set on a finished answer makes it build a web Headers from the
// answer's, and iterate that back into an object. Every other answer (c.json, an error, a 404) gets
// them set afterwards by `setAnswerHeader`, as it always did.

const DECLARED = 'answerHeaders';
/** The answer built with every declared header in (a context variable: no weak table per answer). */
const COMPLETE = 'completeAnswer';

type Declared = Record<string, string>;

/** Declares a header of this request's answer; call before `next()`, then `setAnswerHeader` after it. */
export function declareAnswerHeader(c: Context, name: string, value: string): void {
  const declared = c.get(DECLARED) as Declared | undefined;
  if (declared) declared[name] = value;
  else c.set(DECLARED, { [name]: value });
}

/**
 * `c.json(body, status)` with the headers middleware declared already in (no header set on it later).
 * Only for a handler that sets no header of its own (c.header): those would be lost.
 */
export function jsonAnswer(c: Context, body: unknown, status: ContentfulStatusCode = 200): Response {
  const res = new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', ...(c.get(DECLARED) as Declared | undefined) },
  });
  c.set(COMPLETE, res);
  return res;
}

/** After `next()`: sets a declared header on the answer, unless it was built with it. */
export function setAnswerHeader(c: Context, name: string, value: string): void {
  if (c.get(COMPLETE) !== c.res) c.res.headers.set(name, value);
}
