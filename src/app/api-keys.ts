// API keys: 32 random bytes behind a recognisable prefix (so leaked keys are easy to grep for).
// Only the sha256 is stored; a key's hash is its lookup handle, so no stored value can be replayed.

export const API_KEY_PREFIX = 'hh_live_';

export function generateApiKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return API_KEY_PREFIX + base64url(bytes);
}

export async function hashApiKey(key: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(key));
  return hex(new Uint8Array(digest));
}

export function base64url(bytes: Uint8Array): string {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}
