// The platform's base64 (web-standard btoa/atob, for Workers too) against Node's own encoder.
import { Buffer } from 'node:buffer';
import { decodeBase64, encodeBase64, encodeBase64Url } from '@honest-health/platform/crypto';
import { describe, expect, it } from 'vitest';

describe('base64', () => {
  const samples = [0, 1, 2, 3, 31, 32, 33, 255].map((n) => crypto.getRandomValues(new Uint8Array(n)));
  samples.push(Uint8Array.from({ length: 256 }, (_, i) => i));

  it.each(samples.map((s) => [s.length, s] as const))('encodes %i bytes as Node does', (_, bytes) => {
    expect(encodeBase64(bytes)).toBe(Buffer.from(bytes).toString('base64'));
    expect(encodeBase64Url(bytes)).toBe(Buffer.from(bytes).toString('base64url'));
    expect(decodeBase64(encodeBase64(bytes))).toEqual(new Uint8Array(bytes));
  });

  it('decodes what is not base64 to undefined', () => {
    expect(decodeBase64('not base64!')).toBeUndefined();
  });
});
