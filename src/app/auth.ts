import type { RequestScope } from '@honest-health/platform';
import { createMiddleware } from 'hono/factory';
import type { ApiKeyIndex, Organization } from './api-key-index.js';
import { API_KEY_PREFIX, hashApiKey } from './api-keys.js';
import { ApiError } from './errors.js';

export type AuthEnv = { Variables: RequestScope & { organization: Organization; apiKeyId: string } };

// The key is hashed before the lookup, so the map lookup's timing depends on a sha256 digest the
// caller cannot steer, never on how many characters of a real key they guessed.
export function requireApiKey(apiKeys: ApiKeyIndex) {
  return createMiddleware<AuthEnv>(async (c, next) => {
    const header = c.req.header('authorization') ?? '';
    const match = /^Bearer (\S+)$/.exec(header);
    const key = match?.[1];
    const holder = key?.startsWith(API_KEY_PREFIX) ? apiKeys.byKeyHash(hashApiKey(key)) : undefined;
    if (!holder)
      throw new ApiError(401, 'unauthorized', 'a valid API key is required (Authorization: Bearer <key>)');
    c.set('organization', holder.organization);
    c.set('apiKeyId', holder.keyId);
    await next();
  });
}
