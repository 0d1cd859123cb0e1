import { declareAnswerHeader, setAnswerHeader } from '@honest-health/platform';
import type { MiddlewareHandler } from 'hono';

/**
 * Headers on every API and connect-flow answer, errors included (set after the handler, so the 401s,
 * 404s and error bodies the shell writes get them too). `no-store`: the answers are one organization's
 * data or a one-time redirect, and no cache on the way may keep them (RFC 9111 section 5.2.2.5).
 * `nosniff`: a browser must take the JSON as JSON, never sniff it into script or HTML (Fetch standard,
 * "X-Content-Type-Options"). Declared first, so that an answer built by `jsonAnswer` has them already.
 */
export const apiHeaders: MiddlewareHandler = async (c, next) => {
  declareAnswerHeader(c, 'cache-control', 'no-store');
  declareAnswerHeader(c, 'x-content-type-options', 'nosniff');
  await next();
  setAnswerHeader(c, 'cache-control', 'no-store');
  setAnswerHeader(c, 'x-content-type-options', 'nosniff');
};
