import type { Logger } from '@honest-health/platform';
import { causeChain, errorBody, errorCode, type FieldError } from '@honest-health/platform';
import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';

export { errorBody, type FieldError };

export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: string,
    message: string,
    readonly fields?: FieldError[],
  ) {
    super(message);
  }
}

/**
 * SQLSTATE class 22 (data exception: invalid text for a type, a value out of range, a bad encoding)
 * means the database refused a value the request carried: a 422, never a 500. Input validation should
 * have caught it and names the field; this answer cannot, and never echoes the driver's message,
 * which quotes the value.
 */
export function refusedInput(err: unknown): ApiError | undefined {
  const code = errorCode(err);
  if (code === undefined || !/^22[0-9A-Z]{3}$/.test(code)) return undefined;
  return new ApiError(
    422,
    'invalid_input',
    `the database refused a value in this request (SQLSTATE ${code})`,
  );
}

/**
 * SQLSTATE 23503 on a row's organization_id: the organization was deleted while this process's key
 * index still held its key (until the next API_KEY_REFRESH_MS). The key no longer authenticates
 * anyone: a 401, as after the refresh.
 */
export function organizationGone(err: unknown): ApiError | undefined {
  if (errorCode(err) !== '23503') return undefined;
  for (const e of causeChain(err)) {
    const constraint = (e as { constraint?: unknown } | null)?.constraint;
    if (typeof constraint === 'string' && constraint.endsWith('_organization_id_organizations_id_fk')) {
      return new ApiError(
        401,
        'unauthorized',
        'a valid API key is required (Authorization: Bearer <key>): this key’s organization no longer exists',
      );
    }
  }
  return undefined;
}

/** The app's own errors as answers; anything else is left to the platform (a 503 or a 500). */
export function answerAppError(err: Error, c: Context, log: Logger): Response | undefined {
  if (err instanceof ApiError) return c.json(errorBody(err.code, err.message, err.fields), err.status);
  const gone = organizationGone(err);
  if (gone) return c.json(errorBody(gone.code, gone.message), 401);
  const refused = refusedInput(err);
  if (!refused) return undefined;
  // Worth a look (validation let it through), but the client's fault: warn, not error.
  log.warn('request refused by the database: invalid input', {
    method: c.req.method,
    path: c.req.path,
    sqlstate: errorCode(err),
  });
  return c.json(errorBody(refused.code, refused.message), 422);
}
