import { lookup } from 'node:dns/promises';
import type { Resolver } from './ssrf.js';

/** node:dns on Node and Bun: every A and AAAA answer, as the system resolver gives them to a connect. */
export const systemResolver: Resolver = async (hostname) =>
  (await lookup(hostname, { all: true, verbatim: true })).map((a) => a.address);
