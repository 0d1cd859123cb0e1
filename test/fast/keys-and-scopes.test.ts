// API keys (src/app/api-keys.ts), the scopes that can create invoices (src/app/connections/scopes.ts)
// and the consent id in a Xero access token (src/app/xero/client.ts): pure functions of their input.
import { createHash } from 'node:crypto';
import { encodeBase64Url } from '@honest-health/platform/crypto';
import { describe, expect, it } from 'vitest';
import { API_KEY_PREFIX, generateApiKey, hashApiKey } from '../../src/app/api-keys.js';
import { DEFAULT_XERO_SCOPES, missingInvoiceScope } from '../../src/app/connections/scopes.js';
import { authEventIdOf } from '../../src/app/xero/client.js';

describe('API keys', () => {
  it('are 32 random bytes, base64url, behind a prefix a secret scanner can find', () => {
    const key = generateApiKey();
    expect(API_KEY_PREFIX).toBe('hh_live_');
    expect(key).toMatch(/^hh_live_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(key.slice(API_KEY_PREFIX.length), 'base64url')).toHaveLength(32);
    expect(generateApiKey()).not.toBe(key);
  });

  it('are stored as their sha256 only', () => {
    expect(hashApiKey('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    const key = generateApiKey();
    expect(hashApiKey(key)).toBe(createHash('sha256').update(key).digest('hex'));
  });

  it('base64url has no +, / or padding', () => {
    expect(encodeBase64Url(new Uint8Array([0xfb, 0xff]))).toBe('-_8');
    expect(encodeBase64Url(new Uint8Array([0xfb, 0xef, 0xbe]))).toBe('----');
    expect(encodeBase64Url(new Uint8Array([]))).toBe('');
    const bytes = crypto.getRandomValues(new Uint8Array(64));
    expect(encodeBase64Url(bytes)).toBe(Buffer.from(bytes).toString('base64url'));
  });
});

describe('Xero scopes', () => {
  it('asks for the granular invoices scope by default, which can create invoices', () => {
    expect(DEFAULT_XERO_SCOPES).toBe('offline_access accounting.invoices');
    expect(missingInvoiceScope(DEFAULT_XERO_SCOPES)).toBeUndefined();
  });

  it('accepts the granular or the broad scope, however spaced, and a grant that states no scope', () => {
    expect(missingInvoiceScope('offline_access accounting.transactions')).toBeUndefined();
    expect(missingInvoiceScope('  accounting.invoices\toffline_access ')).toBeUndefined();
    expect(missingInvoiceScope(null)).toBeUndefined();
    expect(missingInvoiceScope(undefined)).toBeUndefined();
  });

  it('says what was granted and what is needed when nothing granted can create invoices', () => {
    const why = missingInvoiceScope('offline_access  accounting.contacts accounting.invoices.read');
    expect(why).toMatch(
      /^Xero granted "offline_access accounting.contacts accounting.invoices.read", which cannot create invoices/,
    );
    expect(why).toMatch(/accounting\.invoices \(or accounting\.transactions/);
    expect(why).toMatch(/XERO_SCOPES/);
    expect(missingInvoiceScope('')).toMatch(/^Xero granted ""/);
  });
});

describe('the consent id of a Xero access token', () => {
  const jwt = (payload: unknown) =>
    `${Buffer.from('{"alg":"RS256"}').toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.sig`;

  it('reads authentication_event_id from the payload, base64url or not', () => {
    expect(authEventIdOf(jwt({ authentication_event_id: 'evt-1', sub: 'u' }))).toBe('evt-1');
    // A payload whose base64url form holds `-` and `_`, which plain base64 would write as `+` and `/`.
    const token = jwt({ authentication_event_id: '~~~???' });
    expect(token.split('.')[1]).toMatch(/-.*_|_.*-/);
    expect(authEventIdOf(token)).toBe('~~~???');
  });

  it('answers null for a token without the claim, a non-string claim, or no JWT at all', () => {
    expect(authEventIdOf(jwt({ sub: 'u' }))).toBeNull();
    expect(authEventIdOf(jwt({ authentication_event_id: 42 }))).toBeNull();
    expect(authEventIdOf('opaque-token')).toBeNull();
    expect(authEventIdOf('a.!!!.c')).toBeNull();
    expect(authEventIdOf('')).toBeNull();
  });
});
