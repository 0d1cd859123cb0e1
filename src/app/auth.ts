import type { RequestScope } from '@honest-health/platform';
import { createMiddleware } from 'hono/factory';
import type { ApiKeyRegistry, Organization } from './api-key-registry.js';
import { API_KEY_PREFIX, hashApiKey } from './api-keys.js';
import { ApiError } from './errors.js';

export type AuthEnv = { Variables: RequestScope & { organization: Organization; apiKeyId: string } };

/** Keys remembered with their hash: a key's clients send it again and again. */
const HASHED_KEYS_MAX = 1024;

// The key is hashed before the index lookup, so that lookup's timing depends on a sha256 digest the
// caller cannot steer, never on how many characters of a real key they guessed. The hashes of keys
// that matched are remembered (a pure function of the key, so revocation still goes through the index
// on every request); only keys that matched enter, so guesses cannot fill the map, and a guess reaches
// a character comparison there only if its string hash collides with a held key's.
export function requireApiKey(apiKeys: ApiKeyRegistry) {
  const hashes = new Map<string, string>();
  const hashOf = (key: string): string => hashes.get(key) ?? hashApiKey(key);
  return createMiddleware<AuthEnv>(async (c, next) => {
    const header = c.req.header('authorization') ?? '';
    const match = /^Bearer (\S+)$/.exec(header);
    const key = match?.[1];
    const hash = key?.startsWith(API_KEY_PREFIX) ? hashOf(key) : undefined;
    const holder = hash === undefined ? undefined : apiKeys.byKeyHash(hash);
    if (holder && key !== undefined && !hashes.has(key)) {
      if (hashes.size >= HASHED_KEYS_MAX) hashes.delete(hashes.keys().next().value as string);
      hashes.set(key, hash as string);
    }
    if (!holder)
      throw new ApiError(401, 'unauthorized', 'a valid API key is required (Authorization: Bearer <key>)');
    c.set('organization', holder.organization);
    c.set('apiKeyId', holder.keyId);
    await next();
  });
}
