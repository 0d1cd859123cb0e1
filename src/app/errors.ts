import type { ContentfulStatusCode } from 'hono/utils/http-status';

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
