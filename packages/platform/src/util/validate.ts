import { config, safeParse, type ZodMiniType } from 'zod/mini';
import en from 'zod/v4/locales/en.js';

// Schemas are written with zod/mini, the functional API of the same package: a bundler keeps only the
// functions used (classic zod's methods pull in all of zod; docs/worker-bundle.md). zod/mini sets no locale, so its default messages would be "Invalid input"; classic zod
// registers English on first use and so do we, here, before the first parse: the messages a client
// or an operator sees (e.g. `Invalid input: expected string, received number`) stay as they were.
// One module for it, not a top-level `config(en())`, because modules have no side effects here.

/** safeParse with zod's English messages, as classic zod gives them. */
export function validate<S extends ZodMiniType>(schema: S, input: unknown): ReturnType<typeof safeParse<S>> {
  if (!config().localeError) config(en());
  return safeParse(compiledOf(schema), input);
}

// A schema on a hot path (the body of every POST) may be compiled by zod's own `compile`: a
// generated parser that answers valid input and hands anything it rejects to the runtime parser, so
// the output and the error messages are zod's (zod/v4/core/compile.d.ts). The compiler is handed in by
// the Node and Bun entries only: it is 90 KB that the Worker bundle cannot spare, and workerd forbids
// the `new Function` it generates code with.
type SchemaCompiler = <S extends ZodMiniType>(schema: S) => S;
let compiler: SchemaCompiler | undefined;
const wanted = new WeakSet<ZodMiniType>();
const compiled = new WeakMap<ZodMiniType, ZodMiniType>();

/** Marks a schema built once at module level as worth compiling where a compiler is installed. */
export function hotSchema<S extends ZodMiniType>(schema: S): S {
  wanted.add(schema);
  return schema;
}

/** Installs zod's `compile` (from `zod/mini`) for the schemas marked with {@link hotSchema}. */
export function useSchemaCompiler(compile: SchemaCompiler): void {
  compiler = compile;
}

function compiledOf<S extends ZodMiniType>(schema: S): S {
  if (compiler === undefined || !wanted.has(schema)) return schema;
  let fast = compiled.get(schema);
  if (fast === undefined) {
    fast = compiler(schema);
    compiled.set(schema, fast);
  }
  return fast as S;
}
