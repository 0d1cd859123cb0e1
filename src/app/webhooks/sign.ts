// Standard Webhooks signing (standardwebhooks.com): `webhook-id`, `webhook-timestamp` and
// `webhook-signature`, the last holding one `v1,<base64>` per secret in force, space-separated, so a
// receiver verifies with either secret while a rotation overlaps. The signature is the spec's
// HMAC-SHA256 of `<id>.<timestamp>.<body>` under the secret's base64-decoded bytes, computed with
// WebCrypto: the `standardwebhooks` library computes the same bytes (the tests check it, and verify every
// delivery with it), but its pure-JS SHA-256 put the Worker bundle over its size budget.

const SECRET_PREFIX = 'whsec_';
const encoder = new TextEncoder();

const toBase64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));

/** A new signing secret, `whsec_` and 32 random bytes in base64, as the library takes it. */
export function newSigningSecret(): string {
  return SECRET_PREFIX + toBase64(crypto.getRandomValues(new Uint8Array(32)));
}

export interface SignedHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

async function signature(secret: string, content: string): Promise<string> {
  const raw = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  const keyBytes = Uint8Array.from(atob(raw), (c) => c.charCodeAt(0));
  const key = await crypto.subtle.importKey('raw', keyBytes, { name: 'HMAC', hash: 'SHA-256' }, false, [
    'sign',
  ]);
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, encoder.encode(content)));
  return `v1,${toBase64(mac)}`;
}

/** The headers for `body`, signed with every secret given (the current one first). */
export async function signedHeaders(
  secrets: readonly string[],
  messageId: string,
  at: Date,
  body: string,
): Promise<SignedHeaders> {
  if (secrets.length === 0) throw new Error('no signing secret');
  const timestamp = String(Math.floor(at.getTime() / 1000));
  const content = `${messageId}.${timestamp}.${body}`;
  const signatures = await Promise.all(secrets.map((secret) => signature(secret, content)));
  return {
    'webhook-id': messageId,
    'webhook-timestamp': timestamp,
    'webhook-signature': signatures.join(' '),
  };
}
