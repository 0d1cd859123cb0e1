import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { errorCode } from '../platform/error-chain.js';

// One JSON shape for every error the API returns: {"error":{"code","message","fields"?}}.

export interface FieldError {
  path: string;
  message: string;
}

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

export function errorBody(code: string, message: string, fields?: FieldError[]) {
  return { error: { code, message, ...(fields ? { fields } : {}) } };
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
