// Identifiers, tokens and the date formats Xero puts on the wire. Web-standard APIs only.

const encoder = new TextEncoder();

export function uuid(): string {
  return crypto.randomUUID();
}

export function base64url(input: Uint8Array | string): string {
  const bytes = typeof input === 'string' ? encoder.encode(input) : input;
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function randomToken(bytes = 32): string {
  const buffer = new Uint8Array(bytes);
  crypto.getRandomValues(buffer);
  return base64url(buffer);
}

/**
 * A JWT-shaped token (Xero's access and id tokens are RS256 JWTs). The signature is random bytes: the
 * sandbox looks tokens up by value and never verifies them, but clients that decode `exp` or
 * `authentication_event_id` from the payload see what Xero would send.
 */
export function fakeJwt(payload: Record<string, unknown>): string {
  const header = { alg: 'RS256', kid: 'xero-sandbox', typ: 'JWT' };
  return `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(payload))}.${randomToken(64)}`;
}

export async function sha256Base64url(value: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', encoder.encode(value));
  return base64url(new Uint8Array(digest));
}

const DAY_MS = 86_400_000;

export function startOfUtcDay(ms: number): number {
  return Math.floor(ms / DAY_MS) * DAY_MS;
}

/** Xero's (MS-AJAX) date: "/Date(1518652800000+0000)/", used for Date, DueDate, UpdatedDateUTC. */
export function msDate(ms: number): string {
  return `/Date(${ms}+0000)/`;
}

/** The response envelope's DateTimeUTC has no offset: "/Date(1518685950940)/". */
export function msDateTime(ms: number): string {
  return `/Date(${ms})/`;
}

/** DateString / DueDateString: "2018-02-15T00:00:00". */
export function xeroDateString(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19);
}

/** The connections endpoint's dates: "2019-07-09T23:40:30.1833130" (seven fractional digits, no zone). */
export function connectionDate(ms: number): string {
  return new Date(ms).toISOString().replace('Z', '0000');
}

/** "MM/DD/YYYY HH:mm:ss", as in Xero's "TokenExpired: token expired at ..." detail. */
export function usDateTime(ms: number): string {
  const d = new Date(ms);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(d.getUTCMonth() + 1)}/${two(d.getUTCDate())}/${d.getUTCFullYear()} ${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}`;
}
