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
  return safeParse(schema, input);
}
