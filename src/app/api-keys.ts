// API keys: 32 random bytes behind a recognisable prefix (so leaked keys are easy to grep for).
// Only the sha256 is stored; a key's hash is its lookup handle, so no stored value can be replayed.

import { sha256Hex } from '../platform/sha256.js';

export const API_KEY_PREFIX = 'hh_live_';

export function generateApiKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return API_KEY_PREFIX + base64url(bytes);
}

export function hashApiKey(key: string): string {
  return sha256Hex(key);
}

export function base64url(bytes: Uint8Array): string {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}
