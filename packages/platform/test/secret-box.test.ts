// The secret box (packages/platform/src/util/secret-box.ts): AES-256-GCM over WebCrypto for tokens stored at rest,
// bound to their place by associated data, each ciphertext naming its key so keys can rotate.
import { createHash } from 'node:crypto';
import { createSecretBox, generateKeyBase64, SecretBoxOpenError } from '@honest-health/platform/crypto';
import { describe, expect, it } from 'vitest';

const KEY = Buffer.alloc(32, 7).toString('base64');

describe('secret box', () => {
  it('opens what it sealed, and seals the same text differently every time (a fresh IV)', async () => {
    const box = await createSecretBox(KEY);
    const one = await box.seal('refresh-token-1', 'xero_grants:g1:refresh');
    const two = await box.seal('refresh-token-1', 'xero_grants:g1:refresh');
    expect(one).not.toBe(two);
    expect(one).not.toContain('refresh-token-1');
    // k1.<key id>.base64(12-byte IV || ciphertext || 16-byte tag)
    const [version, kid, body] = one.split('.');
    expect(version).toBe('k1');
    expect(kid).toBe(box.keyId);
    expect(Buffer.from(body ?? '', 'base64')).toHaveLength(12 + 'refresh-token-1'.length + 16);
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
    const [, kid, body] = sealed.split('.');
    const bytes = Buffer.from(body ?? '', 'base64');
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 1;
    await expect(box.open(`k1.${kid}.${bytes.toString('base64')}`, 'xero_grants:g1:access')).rejects.toThrow(
      `does not decrypt under its key ${kid}`,
    );
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
    const box = await createSecretBox(generated);
    const sealed = await box.seal('a refresh token', 'row-1');
    expect(sealed).not.toContain('a refresh token');
    expect(await box.open(sealed, 'row-1')).toBe('a refresh token');
  });

  it('names its key by the first 4 bytes of its SHA-256, and seals under the current key only', async () => {
    const box = await createSecretBox(KEY, [generateKeyBase64()]);
    const expected = createHash('sha256').update(Buffer.from(KEY, 'base64')).digest('hex').slice(0, 8);
    expect(box.keyId).toBe(expected);
    const sealed = await box.seal('t', 'x');
    expect(sealed.startsWith(`k1.${expected}.`)).toBe(true);
    expect(box.needsReseal(sealed)).toBe(false);
  });

  it('rotates: the new key seals, the previous one still opens, and without it a clear error names the key', async () => {
    const OLD = generateKeyBase64();
    const before = await createSecretBox(OLD);
    const sealedOld = await before.seal('refresh-token', 'g:refresh');
    // A ciphertext from before key ids: the bare base64 part.
    const legacy = sealedOld.split('.')[2] as string;
    expect(await before.open(legacy, 'g:refresh')).toBe('refresh-token');

    const during = await createSecretBox(KEY, [OLD]);
    expect(during.keyId).not.toBe(before.keyId);
    expect(await during.open(sealedOld, 'g:refresh')).toBe('refresh-token');
    expect(await during.open(legacy, 'g:refresh')).toBe('refresh-token');
    expect(during.needsReseal(sealedOld)).toBe(true);
    expect(during.needsReseal(legacy)).toBe(true);
    const resealed = await during.seal(await during.open(sealedOld, 'g:refresh'), 'g:refresh');
    expect(during.needsReseal(resealed)).toBe(false);

    const after = await createSecretBox(KEY);
    expect(await after.open(resealed, 'g:refresh')).toBe('refresh-token');
    const missing = await after.open(sealedOld, 'g:refresh').catch((err: unknown) => err);
    expect(missing).toBeInstanceOf(SecretBoxOpenError);
    expect(missing).toMatchObject({ kind: 'missing_key', keyId: before.keyId });
    expect((missing as Error).message).toBe(`sealed under key ${before.keyId}, which is not configured`);
    await expect(after.open(legacy, 'g:refresh')).rejects.toMatchObject({ kind: 'legacy' });
    await expect(after.open('k1.', 'g:refresh')).rejects.toMatchObject({ kind: 'missing_key' });
    await expect(after.open(`k1.${after.keyId}.!!`, 'g:refresh')).rejects.toMatchObject({ kind: 'corrupt' });
  });
});
