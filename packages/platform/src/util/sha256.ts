import * as nodeCrypto from 'node:crypto';

// node:crypto, not crypto.subtle: digest() is async and on Node runs on the libuv threadpool, two
// round trips per API request for a few hundred bytes. createHash is synchronous and exists on all
// three runtimes (Node, Bun, and Workers under the nodejs_compat flag that wrangler.toml sets).
// crypto.hash, the one-shot (Node 21.7+, Bun), skips the Hash object that createHash builds per call
// (https://nodejs.org/api/crypto.html#cryptohashalgorithm-data-options).
// Read off the namespace, not imported by name: a runtime without it gets undefined, not a link error.
const oneShot: typeof nodeCrypto.hash | undefined =
  typeof nodeCrypto.hash === 'function' ? nodeCrypto.hash : undefined;

/**
 * SHA-256 of `text`, as lowercase hex: for what is compared by hash (API keys, one-time states).
 *
 * @example
 * ```ts
 * const keyHash = sha256Hex(apiKey);
 * ```
 */
export function sha256Hex(text: string): string {
  return oneShot
    ? oneShot('sha256', text, 'hex')
    : nodeCrypto.createHash('sha256').update(text).digest('hex');
}
