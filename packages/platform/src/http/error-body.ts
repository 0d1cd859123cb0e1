// One JSON shape for every error the server returns, the platform's and the app's:
// {"error":{"code","message","fields"?}}.

/** One invalid field of a request body: its path and what is wrong with it. */
export interface FieldError {
  path: string;
  message: string;
}

/**
 * The body of an error answer.
 *
 * @example
 * ```ts
 * return c.json(errorBody('cart_not_found', 'no cart with this id'), 404);
 * ```
 */
export function errorBody(code: string, message: string, fields?: FieldError[]) {
  return { error: { code, message, ...(fields ? { fields } : {}) } };
}
