import { Webhook } from 'standardwebhooks';

// Standard Webhooks signing (standardwebhooks.com), with its reference library: `webhook-id`,
// `webhook-timestamp` and `webhook-signature`, the last holding one `v1,<base64>` per secret in force,
// space-separated, so a receiver verifies with either secret while a rotation overlaps.

const SECRET_PREFIX = 'whsec_';

/** A new signing secret, `whsec_` and 32 random bytes in base64, as the library takes it. */
export function newSigningSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return SECRET_PREFIX + btoa(String.fromCharCode(...bytes));
}

export interface SignedHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/** The headers for `body`, signed with every secret given (the current one first). */
export function signedHeaders(
  secrets: readonly string[],
  messageId: string,
  at: Date,
  body: string,
): SignedHeaders {
  if (secrets.length === 0) throw new Error('no signing secret');
  const signatures = secrets.map((secret) => new Webhook(secret).sign(messageId, at, body));
  return {
    'webhook-id': messageId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': signatures.join(' '),
  };
}
