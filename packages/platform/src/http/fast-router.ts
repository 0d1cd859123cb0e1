import type { Router } from 'hono/router';
import { RegExpRouter } from 'hono/router/reg-exp-router';
import { SmartRouter } from 'hono/router/smart-router';
import { TrieRouter } from 'hono/router/trie-router';
import type { H, RouterRoute } from 'hono/types';

/**
 * Hono's default router pair (RegExpRouter, TrieRouter for a pattern beyond it; hono.dev/docs/api/routers),
 * for the shell of a process that need not count bundle bytes (Node, Bun): RegExpRouter matches a
 * static path such as POST /api/items by one map lookup, where TrieRouter walks its tree on every
 * request. Only the router of the app that serves matters: route() adds a sub-app's routes to it.
 * Kept out of hono.ts so that the Worker bundle never carries it.
 */
export const fastRouter = (): Router<[H, RouterRoute]> =>
  new SmartRouter({ routers: [new RegExpRouter(), new TrieRouter()] });
