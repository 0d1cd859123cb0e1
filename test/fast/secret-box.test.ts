// The secret box (src/platform/secret-box.ts): AES-256-GCM over WebCrypto for tokens stored at rest,
// bound to their place by associated data.
import { describe, expect, it } from 'vitest';
import { createSecretBox, generateKeyBase64 } from '../../src/platform/secret-box.js';

const KEY = Buffer.alloc(32, 7).toString('base64');

describe('secret box', () => {
  it('opens what it sealed, and seals the same text differently every time (a fresh IV)', async () => {
    const box = await createSecretBox(KEY);
    const one = await box.seal('refresh-token-1', 'xero_grants:g1:refresh');
    const two = await box.seal('refresh-token-1', 'xero_grants:g1:refresh');
    expect(one).not.toBe(two);
    expect(one).not.toContain('refresh-token-1');
    // base64(12-byte IV || ciphertext || 16-byte tag)
    expect(Buffer.from(one, 'base64')).toHaveLength(12 + 'refresh-token-1'.length + 16);
    expect(await box.open(one, 'xero_grants:g1:refresh')).toBe('refresh-token-1');
    expect(await box.open(two, 'xero_grants:g1:refresh')).toBe('refresh-token-1');
    expect(await box.open(await box.seal('', 'x'), 'x')).toBe('');
    expect(await box.open(await box.seal('ünïcødé ✓', 'x'), 'x')).toBe('ünïcødé ✓');
  });

  it('refuses a ciphertext moved to another row or column, tampered with, or sealed under another key', async () => {
    const box = await createSecretBox(KEY);
    const sealed = await box.seal('access-token', 'xero_grants:g1:access');
    await expect(box.open(sealed, 'xero_grants:g2:access')).rejects.toThrow();
    await expect(box.open(sealed, 'xero_grants:g1:refresh')).rejects.toThrow();
    const bytes = Buffer.from(sealed, 'base64');
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 1;
    await expect(box.open(bytes.toString('base64'), 'xero_grants:g1:access')).rejects.toThrow();
    const other = await createSecretBox(generateKeyBase64());
    await expect(other.open(sealed, 'xero_grants:g1:access')).rejects.toThrow();
  });

  it('takes only a 32-byte key, base64-encoded', async () => {
    for (const key of [
      '',
      'not base64!',
      Buffer.alloc(16).toString('base64'),
      Buffer.alloc(33).toString('base64'),
    ]) {
      await expect(createSecretBox(key), key).rejects.toThrow('the key must be 32 bytes, base64-encoded');
    }
    const generated = generateKeyBase64();
    expect(Buffer.from(generated, 'base64')).toHaveLength(32);
    expect(generated).not.toBe(generateKeyBase64());
    await expect(createSecretBox(generated)).resolves.toBeDefined();
  });
});
