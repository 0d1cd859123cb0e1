import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PLATFORM_PACKAGE, specifiers } from '../support/import-scan.js';

// On Workers a promise nobody hands to `waitUntil` may be cancelled once the answer is sent. So in
// every source a Worker entry reaches, a promise is awaited, returned, kept by something that is
// awaited, or handed to waitUntil (c.var.waitUntil in a route). biome's nursery/noFloatingPromises
// (biome.json) catches a bare floating promise; it takes `void promise` as handled, which is exactly
// the way a background promise escapes, so this test lists every `void call(...)` and asks each for
// its reason.

const root = join(import.meta.dirname, '../..');
const WORKER_ENTRIES = [
  'src/runtime/worker.ts',
  'src/runtime/worker-hyperdrive.ts',
  'src/runtime/worker-errors.ts',
];

// An entry's build target (`./dist/x.js`, or `{ default }`) names the source it is built from (`src/x.ts`).
const exportsMap = Object.fromEntries(
  Object.entries(
    JSON.parse(readFileSync(join(root, 'packages/platform/package.json'), 'utf8')).exports as Record<
      string,
      string | { default: string }
    >,
  ).map(([key, target]) => [
    key,
    (typeof target === 'string' ? target : target.default).replace(/^\.\/dist\//, './src/'),
  ]),
) as Record<string, string>;

/** The repository file a specifier names from `from`, or undefined for an outside package. */
function resolve(from: string, spec: string): string | undefined {
  let target: string | undefined;
  if (spec.startsWith('.')) target = normalize(join(dirname(from), spec));
  else if (spec === PLATFORM_PACKAGE || spec.startsWith(`${PLATFORM_PACKAGE}/`)) {
    const key = `.${spec.slice(PLATFORM_PACKAGE.length)}`;
    const internal = key.startsWith('./internal/')
      ? `./src/${key.slice('./internal/'.length)}.ts`
      : undefined;
    const path = exportsMap[key] ?? internal;
    if (path) target = join('packages/platform', path);
  }
  if (!target) return undefined;
  for (const candidate of [target, target.replace(/\.js$/, '.ts'), `${target}.ts`]) {
    if (existsSync(join(root, candidate)) && candidate.endsWith('.ts')) return candidate;
  }
  return undefined;
}

/** Every source a Worker entry reaches by import (static, dynamic or type: a superset of what runs). */
function workerSources(): string[] {
  const seen = new Set<string>();
  const queue = [...WORKER_ENTRIES];
  while (queue.length > 0) {
    const file = queue.pop() as string;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const spec of specifiers(readFileSync(join(root, file), 'utf8'))) {
      const next = resolve(file, spec);
      if (next && !seen.has(next)) queue.push(next);
    }
  }
  return [...seen].map((f) => relative(root, join(root, f)).replaceAll('\\', '/')).sort();
}

// `void` applied to a call: `void f(`, `void a.b.c(`. Not `void (await ...)` (awaited), not `void 0`.
const VOID_CALL = /\bvoid\s+(?!\()(?!0\b)[A-Za-z_$#][\w$#.?!]*\s*\(/g;
// A statement that only hangs a handler on a promise and drops the result: `p.catch(`, `f(x).then(`.
const DETACHED =
  /^[ \t]*(?!await\b|return\b|yield\b)[A-Za-z_$#][\w$#.?!]*(?:\([^;\n]*\))?\s*\.(?:then|catch|finally)\(/gm;

/**
 * Each `void call(` and detached `.then(`/`.catch(` in Worker code, by file and the call's text, with
 * why it needs no waitUntil.
 */
const ALLOWED: Record<string, Record<string, string>> = {
  'packages/platform/src/db/poison-retry.ts': {
    'void handle.dispose(':
      "the disposal's pool ending is kept by the handle, and close() (in waitUntil) awaits it",
  },
  'packages/platform/src/http/shell.ts': {
    'void database.dispose(':
      "the disposal's pool ending is kept by the handle, and close() (in waitUntil) awaits it",
  },
  'packages/platform/src/db/probe.ts': {
    'void probe.dispose(':
      "the disposal's pool ending is kept by the handle, and close() (in waitUntil) awaits it",
    'void app.dispose(':
      "the disposal's pool ending is kept by the handle, and close() (in waitUntil) awaits it",
    'query.catch(': "a probe that lost to its timeout: the pool's end in close() (in waitUntil) waits for it",
  },
  'packages/platform/src/db/drivers/pg-compatible.ts': {
    'result.catch(': 'an observer on a query the caller awaits: the query itself is returned',
    'ready.then(': "a connection's preparation, settling the connect callback the caller awaits",
  },
  'packages/platform/src/http/body-budget.ts': {
    'void reader.cancel(': 'cancels the body the request itself is reading: nothing outlives the request',
  },
  'packages/platform/src/jobs/tick-monitor.ts': {
    'work.then(': 'bookkeeping on work kept in #pending, which idle() awaits inside waitUntil',
  },
  'src/app/push/dispatch.ts': {
    'call.then(': 'each call settles the dispatch promise the push tick awaits: none outlives it',
  },
  'src/app/xero/client.ts': {
    'void add(': 'synchronous: returns nothing',
  },
};

function voidCalls(file: string): string[] {
  const code = readFileSync(join(root, file), 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/(^|[^:])\/\/.*$/gm, '$1');
  // A detached handler counts only as a statement of its own (not an argument, nor an arrow's body).
  const statement = (at: number) => /(^|[;{}])\s*$/.test(code.slice(Math.max(0, at - 200), at));
  const detached = [...code.matchAll(DETACHED)].filter(
    (m) => statement(m.index) && !/\bwaitUntil\(/.test(m[0]),
  );
  return [...code.matchAll(VOID_CALL), ...detached].map((m) => m[0].trim().replace(/\s+/g, ' '));
}

describe('background promises on Workers', () => {
  const sources = workerSources();

  it('reads the sources the Worker entries reach', () => {
    expect(sources).toContain('src/app/connections/routes.ts');
    expect(sources).toContain('packages/platform/src/runtimes/worker.ts');
    // Process-only code is not among them.
    expect(sources).not.toContain('packages/platform/src/lifecycle/process.ts');
  });

  it('hands every promise it does not await to waitUntil: each `void call(` or detached handler is known not to need it', () => {
    const unexplained = sources.flatMap((file) =>
      voidCalls(file)
        .filter((call) => ALLOWED[file]?.[call] === undefined)
        .map((call) => `${file}: ${call}`),
    );
    expect(unexplained).toEqual([]);
  });

  it('keeps no stale exceptions', () => {
    const stale = Object.entries(ALLOWED).flatMap(([file, calls]) =>
      Object.keys(calls)
        .filter((call) => !sources.includes(file) || !voidCalls(file).includes(call))
        .map((call) => `${file}: ${call}`),
    );
    expect(stale).toEqual([]);
  });
});
