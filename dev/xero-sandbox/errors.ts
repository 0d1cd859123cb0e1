// Xero's error bodies. The accounting API answers auth and server failures with a problem-details-like
// object ({ Type, Title, Status, Detail, Instance, Extensions }) and validation failures with its
// ApiException shape ({ ErrorNumber, Type, Message, Elements }); the identity server uses OAuth's
// { error } bodies.
import { uuid } from './ids.js';

type Headers = Record<string, string>;

export function json(status: number, body: unknown, headers: Headers = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
  });
}

export function problem(status: number, title: string, detail: string, headers: Headers = {}): Response {
  return json(
    status,
    { Type: null, Title: title, Status: status, Detail: detail, Instance: uuid(), Extensions: {} },
    headers,
  );
}

export function unauthorized(detail: string, description: string): Response {
  return problem(401, 'Unauthorized', detail, {
    'www-authenticate': `Bearer error="invalid_token", error_description="${description}"`,
  });
}

export function forbidden(detail: string): Response {
  return problem(403, 'Forbidden', detail);
}

export function serverError(): Response {
  return problem(
    500,
    'An error occurred',
    'An error occurred in Xero. Check the API Status page http://status.developer.xero.com for current service status.',
  );
}

export function serviceUnavailable(): Response {
  return problem(
    503,
    'Service Unavailable',
    'The Xero API is temporarily unavailable. Please try again later.',
  );
}

export function gatewayTimeout(): Response {
  return new Response('Gateway Timeout', { status: 504, headers: { 'content-type': 'text/plain' } });
}

export function notFound(): Response {
  return new Response("The resource you're looking for cannot be found", {
    status: 404,
    headers: { 'content-type': 'text/plain; charset=utf-8' },
  });
}

export interface ValidationElement extends Record<string, unknown> {
  ValidationErrors: { Message: string }[];
}

export function validationBody(elements: ValidationElement[]): Record<string, unknown> {
  return {
    ErrorNumber: 10,
    Type: 'ValidationException',
    Message: 'A validation exception occurred',
    Elements: elements,
  };
}

export function validationException(messages: string[], element: Record<string, unknown> = {}): Response {
  return json(
    400,
    validationBody([{ ...element, ValidationErrors: messages.map((Message) => ({ Message })) }]),
  );
}

export function postDataInvalid(message: string): Response {
  return json(400, { ErrorNumber: 14, Type: 'PostDataInvalidException', Message: message });
}

/** The identity server's OAuth error body. `reason` rides in a sandbox header for debugging only. */
export function oauthError(status: 400 | 401, error: string, reason?: string): Response {
  return json(
    status,
    { error },
    {
      'cache-control': 'no-store',
      pragma: 'no-cache',
      ...(reason ? { 'x-xero-sandbox-reason': reason } : {}),
    },
  );
}

/** 429 as the rate limiter (or an injected 429 fault) sends it; `headers` carries Retry-After and friends. */
export function tooManyRequests(problemName: string, headers: Record<string, string>): Response {
  return problem(429, 'Too Many Requests', `Rate limit exceeded: ${problemName}`, headers);
}
