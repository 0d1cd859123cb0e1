import type { Env, Schema } from 'hono';
import { HonoBase, type HonoOptions } from 'hono/hono-base';
import { TrieRouter } from 'hono/router/trie-router';
import type { BlankEnv, BlankSchema } from 'hono/types';

/**
 * Hono with TrieRouter alone, for the shell and every app's routes. `hono`'s own class is
 * SmartRouter over RegExpRouter and TrieRouter, and a bundle keeps both whichever serves; TrieRouter
 * supports every pattern and matches as RegExpRouter does, strict trailing slashes included
 * (hono.dev/concepts/routers). The presets `hono/tiny` and `hono/quick` are smaller still, but their
 * PatternRouter and LinearRouter let `/x/` match `/x` (honojs/hono#5406). Built as hono's presets
 * are: HonoBase with the router set (docs/worker-bundle.md has what it saves).
 *
 * Routes mounted with `route()` are added to the parent's router, so the shell's router is the one
 * that matches: an app may still build its routes with `hono`'s class, at the cost of its size.
 *
 * @example
 * ```ts
 * import { Hono } from '@honest-health/platform';
 *
 * export const routes = new Hono().get('/notes/:id', (c) => c.json({ id: c.req.param('id') }));
 * ```
 */
export class Hono<
  E extends Env = BlankEnv,
  S extends Schema = BlankSchema,
  BasePath extends string = '/',
> extends HonoBase<E, S, BasePath> {
  constructor(options: HonoOptions<E> = {}) {
    super(options);
    this.router = options.router ?? new TrieRouter();
  }
}
