// API keys: 32 random bytes behind a recognisable prefix (so leaked keys are easy to grep for).
// Only the sha256 is stored; a key's hash is its lookup handle, so no stored value can be replayed.

import { encodeBase64Url } from '../platform/base64.js';
import { sha256Hex } from '../platform/sha256.js';

export const API_KEY_PREFIX = 'hh_live_';

export function generateApiKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return API_KEY_PREFIX + encodeBase64Url(bytes);
}

export function hashApiKey(key: string): string {
  return sha256Hex(key);
}
