// AES-256-GCM through WebCrypto (the same code on Node, Bun and Workers) for secrets stored at rest.
// A ciphertext is `k1.<kid>.<base64(iv || ciphertext+tag)>`: the key id names the key that sealed it,
// so keys can rotate (seal under the current key, open under it or a previous one). A ciphertext from
// before key ids is the bare base64 part; it is opened with the current key, then the previous ones.
// The associated data binds a ciphertext to its place (a row and a column), so a ciphertext copied
// into another row does not decrypt.

import { decodeBase64, encodeBase64 } from './base64.js';

const IV_BYTES = 12;
const PREFIX = 'k1.';

/**
 * Seals and opens secrets with AES-GCM under the current key, opening those sealed under previous keys
 * too.
 */
export interface SecretBox {
  /** The id of the key new ciphertexts are sealed under. */
  readonly keyId: string;
  seal(plaintext: string, associatedData: string): Promise<string>;
  open(sealed: string, associatedData: string): Promise<string>;
  /** True when `sealed` is not under the current key (a previous key's, or from before key ids). */
  needsReseal(sealed: string): boolean;
}

/**
 * Why a ciphertext did not open. `missing_key`: it names a key this box was not given (the operator
 * can heal it by configuring that key again). `legacy`: from before key ids, and no configured key
 * opens it (a missing key or a corrupt row: it cannot tell which). `corrupt`: its own key is here and
 * refuses it (tampered, truncated, or moved to another row).
 */
export class SecretBoxOpenError extends Error {
  override name = 'SecretBoxOpenError';

  constructor(
    readonly kind: 'missing_key' | 'legacy' | 'corrupt',
    readonly keyId: string | null,
  ) {
    super(
      kind === 'missing_key'
        ? `sealed under key ${keyId}, which is not configured`
        : kind === 'legacy'
          ? 'sealed without a key id, and no configured key opens it'
          : `does not decrypt under its key ${keyId} (corrupt, or moved from another row)`,
    );
  }
}

interface Key {
  id: string;
  key: CryptoKey;
}

/** The key id: the first 4 bytes of SHA-256 over the raw key, hex. It names the key, never reveals it. */
async function importKey(keyBase64: string): Promise<Key> {
  const raw = decodeBase64(keyBase64) ?? new Uint8Array();
  if (raw.length !== 32) throw new Error('the key must be 32 bytes, base64-encoded');
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', raw));
  const id = [...digest.subarray(0, 4)].map((b) => b.toString(16).padStart(2, '0')).join('');
  const key = await crypto.subtle.importKey('raw', raw, 'AES-GCM', false, ['encrypt', 'decrypt']);
  return { id, key };
}

/**
 * AES-GCM with base64 keys: `current` seals; `current` and `previous` open, so a key rotates without a
 * flag day (reseal, then drop the old key).
 *
 * @example
 * ```ts
 * const box = await createSecretBox(currentKey, [previousKey]);
 * const sealed = await box.seal(refreshToken, `grant:${grantId}`); // bound to its row
 * ```
 */
export async function createSecretBox(current: string, previous: readonly string[] = []): Promise<SecretBox> {
  const sealing = await importKey(current);
  const opening = new Map<string, CryptoKey>([[sealing.id, sealing.key]]);
  for (const k of previous) {
    const { id, key } = await importKey(k);
    if (!opening.has(id)) opening.set(id, key);
  }
  const encoder = new TextEncoder();

  const decrypt = async (key: CryptoKey, bytes: Uint8Array<ArrayBuffer>, associatedData: string) =>
    new TextDecoder().decode(
      await crypto.subtle.decrypt(
        { name: 'AES-GCM', iv: bytes.subarray(0, IV_BYTES), additionalData: encoder.encode(associatedData) },
        key,
        bytes.subarray(IV_BYTES),
      ),
    );

  return {
    keyId: sealing.id,
    async seal(plaintext, associatedData) {
      const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
      const sealed = await crypto.subtle.encrypt(
        { name: 'AES-GCM', iv, additionalData: encoder.encode(associatedData) },
        sealing.key,
        encoder.encode(plaintext),
      );
      const out = new Uint8Array(IV_BYTES + sealed.byteLength);
      out.set(iv);
      out.set(new Uint8Array(sealed), IV_BYTES);
      return `${PREFIX}${sealing.id}.${encodeBase64(out)}`;
    },
    async open(sealed, associatedData) {
      if (sealed.startsWith(PREFIX)) {
        // Base64 has no '.', so a legacy ciphertext never starts with the prefix.
        const dot = sealed.indexOf('.', PREFIX.length);
        const keyId = dot < 0 ? '' : sealed.slice(PREFIX.length, dot);
        const key = opening.get(keyId);
        if (!key) throw new SecretBoxOpenError('missing_key', keyId);
        const bytes = decodeBase64(sealed.slice(dot + 1));
        if (!bytes) throw new SecretBoxOpenError('corrupt', keyId);
        try {
          return await decrypt(key, bytes, associatedData);
        } catch {
          throw new SecretBoxOpenError('corrupt', keyId);
        }
      }
      const bytes = decodeBase64(sealed);
      if (bytes) {
        for (const key of opening.values()) {
          try {
            return await decrypt(key, bytes, associatedData);
          } catch {
            // the next key
          }
        }
      }
      throw new SecretBoxOpenError('legacy', null);
    },
    needsReseal(sealed) {
      return !sealed.startsWith(`${PREFIX}${sealing.id}.`);
    },
  };
}

/** A new random 256-bit key, base64: a key for `createSecretBox`. */
export function generateKeyBase64(): string {
  return encodeBase64(crypto.getRandomValues(new Uint8Array(32)));
}
