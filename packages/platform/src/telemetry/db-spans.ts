import type { Span, SpanAttributes, Tracing } from '../util/tracing.js';

// Database spans without patching the drivers' modules: the client object that Drizzle and the platform
// query through (`db.$client`: a node-postgres or Neon WebSocket pool, or a PGlite instance) gets its
// query() wrapped in place, and so does every client its promise-style connect() lends out. A query
// issued inside a request or tick span becomes a child span named by its operation and table; the
// statement text and its parameters are never recorded.
// Callback-style calls pass through untouched: pg-pool's own pool.query() runs on them, so nothing is
// counted twice. The Neon HTTP driver captures its query function when Drizzle is built, so its
// queries get no spans (the request or tick span still times them).

type Fn = (...args: unknown[]) => unknown;

const traced = new WeakSet<object>();

export function traceQueries(client: unknown, tracing: Tracing): void {
  if (typeof client !== 'object' || client === null || traced.has(client)) return;
  traced.add(client);
  const target = client as { query?: Fn; connect?: Fn };
  if (typeof target.query === 'function') target.query = wrapQuery(target.query, tracing);
  const connect = target.connect;
  if (typeof connect !== 'function') return;
  target.connect = function (this: unknown, ...args: unknown[]) {
    if (typeof args.at(-1) === 'function') return connect.apply(this, args);
    return (connect.apply(this, args) as Promise<{ query: Fn }>).then((lent) => {
      // The pool hands this client out again later: only this checkout is wrapped, and the poison
      // tracking in pg-compatible.ts restores the original query() on release.
      lent.query = wrapQuery(lent.query, tracing);
      return lent;
    });
  };
}

function wrapQuery(query: Fn, tracing: Tracing): Fn {
  return function (this: unknown, ...args: unknown[]) {
    const span = typeof args.at(-1) === 'function' ? undefined : tracing.child(...describe(args[0]));
    if (!span) return query.apply(this, args);
    let result: unknown;
    try {
      result = query.apply(this, args);
    } catch (err) {
      finish(span, err);
      throw err;
    }
    const pending = result as Promise<unknown> | undefined;
    if (typeof pending?.then === 'function')
      pending.then(
        () => finish(span),
        (err: unknown) => finish(span, err),
      );
    else finish(span);
    return result;
  };
}

function finish(span: Span, err?: unknown): void {
  if (err !== undefined) span.fail(err);
  span.end();
}

// "select … from "orders" …", "update "carts" set …", "insert into drizzle.x": the
// first keyword and, where there is one, the table (the last part of a qualified name).
const OPERATION = /^\s*([a-z]+)/i;
const TABLE =
  /^\s*(?:select\b[\s\S]*?\bfrom|insert\s+into|update|delete\s+from)\s+"?([\w$]+)"?(?:\."?([\w$]+)"?)?/i;

function describe(statement: unknown): [string, { kind: 'client'; attributes: SpanAttributes }] {
  const text =
    typeof statement === 'string' ? statement : String((statement as { text?: unknown } | null)?.text ?? '');
  const operation = OPERATION.exec(text)?.[1]?.toUpperCase() ?? 'QUERY';
  const match = TABLE.exec(text);
  const table = match?.[2] ?? match?.[1];
  const attributes: SpanAttributes = { 'db.system.name': 'postgresql', 'db.operation.name': operation };
  if (table) attributes['db.collection.name'] = table;
  const name = table ? `${operation} ${table}` : operation;
  attributes['db.query.summary'] = name;
  return [name, { kind: 'client', attributes }];
}
