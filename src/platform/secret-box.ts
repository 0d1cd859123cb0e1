// AES-256-GCM through WebCrypto (the same code on Node, Bun and Workers) for secrets stored at rest.
// A ciphertext is base64(iv || ciphertext+tag). The associated data binds it to its place (a row and
// a column), so a ciphertext copied into another row does not decrypt.

import { decodeBase64, encodeBase64 } from './base64.js';

const IV_BYTES = 12;

export interface SecretBox {
  seal(plaintext: string, associatedData: string): Promise<string>;
  open(sealed: string, associatedData: string): Promise<string>;
}

export async function createSecretBox(keyBase64: string): Promise<SecretBox> {
  const raw = decodeBase64(keyBase64) ?? new Uint8Array();
  if (raw.length !== 32) throw new Error('the key must be 32 bytes, base64-encoded');
  const key = await crypto.subtle.importKey('raw', raw, 'AES-GCM', false, ['encrypt', 'decrypt']);
  const encoder = new TextEncoder();
  return {
    async seal(plaintext, associatedData) {
      const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
      const sealed = await crypto.subtle.encrypt(
        { name: 'AES-GCM', iv, additionalData: encoder.encode(associatedData) },
        key,
        encoder.encode(plaintext),
      );
      const out = new Uint8Array(IV_BYTES + sealed.byteLength);
      out.set(iv);
      out.set(new Uint8Array(sealed), IV_BYTES);
      return encodeBase64(out);
    },
    async open(sealed, associatedData) {
      const bytes = decodeBase64(sealed) ?? new Uint8Array();
      const plain = await crypto.subtle.decrypt(
        { name: 'AES-GCM', iv: bytes.subarray(0, IV_BYTES), additionalData: encoder.encode(associatedData) },
        key,
        bytes.subarray(IV_BYTES),
      );
      return new TextDecoder().decode(plain);
    },
  };
}

export function generateKeyBase64(): string {
  return encodeBase64(crypto.getRandomValues(new Uint8Array(32)));
}
