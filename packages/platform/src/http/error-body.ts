// One JSON shape for every error the server returns, the platform's and the app's:
// {"error":{"code","message","fields"?}}.

export interface FieldError {
  path: string;
  message: string;
}

export function errorBody(code: string, message: string, fields?: FieldError[]) {
  return { error: { code, message, ...(fields ? { fields } : {}) } };
}
