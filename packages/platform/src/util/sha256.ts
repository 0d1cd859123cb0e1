import { createHash } from 'node:crypto';

// node:crypto, not crypto.subtle: digest() is async and on Node runs on the libuv threadpool, two
// round trips per API request for a few hundred bytes. createHash is synchronous and exists on all
// three runtimes (Node, Bun, and Workers under the nodejs_compat flag that wrangler.toml sets).
/**
 * SHA-256 of `text`, as lowercase hex: for what is compared by hash (API keys, one-time states).
 *
 * @example
 * ```ts
 * const keyHash = sha256Hex(apiKey);
 * ```
 */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
