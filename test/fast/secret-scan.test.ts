// The secret scan that test/secrets.test.ts and the global setup run over spawned servers' output
// (test/support/secret-scan.ts) finds what it looks for. Pure: text in, findings out.
import { describe, expect, it } from 'vitest';
import { SUITE_SECRETS, scanForSecrets } from '../support/secret-scan.js';

describe('secrets', () => {
  it('the scan finds each kind of secret it looks for', () => {
    const planted = [
      '{"msg":"x","key":"hh_live_AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJKKK"}',
      '{"msg":"x","url":"postgres://app:pw@db.internal:5432/app"}',
      '{"msg":"x","token":"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2ln"}',
      '{"msg":"x","secret":"sandbox-secret"}',
    ].join('\n');
    expect(scanForSecrets(planted, SUITE_SECRETS).map((f) => f.name)).toEqual([
      'an API key',
      'a connection string',
      'a bearer JWT',
      'XERO_CLIENT_SECRET of the tests',
    ]);
    expect(scanForSecrets('{"msg":"boot complete","ms":412}', SUITE_SECRETS)).toEqual([]);
  });
});
