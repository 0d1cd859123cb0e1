// The webhook SSRF guard and Standard Webhooks signing: pure functions, and the system resolver on
// `localhost` (the hosts file, no network).

import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { systemResolver } from '../../src/app/webhooks/dns-resolver.js';
import { newSigningSecret, signedHeaders } from '../../src/app/webhooks/sign.js';
import { blockedAddress, checkEndpointUrl, checkResolved } from '../../src/app/webhooks/ssrf.js';

const prod = { allowInsecure: false };
const dev = { allowInsecure: true };

describe('webhook endpoint URLs at registration', () => {
  it.each([
    ['https://10.0.0.1/hook', 'private'],
    ['https://172.16.5.4/hook', 'private'],
    ['https://192.168.1.1/hook', 'private'],
    ['https://169.254.169.254/latest/meta-data', 'metadata'],
    ['https://169.254.1.1/', 'link-local'],
    ['https://100.64.0.1/', 'CGNAT'],
    ['https://127.0.0.1/', 'loopback'],
    ['https://0x7f.1/', 'loopback'],
    ['https://2130706433/', 'loopback'],
    ['https://0.0.0.0/', 'unspecified'],
    ['https://[::1]/', 'loopback'],
    ['https://[::]/', 'unspecified'],
    ['https://[::ffff:127.0.0.1]/', 'loopback'],
    ['https://[::ffff:7f00:1]/', 'loopback'],
    ['https://[::ffff:169.254.169.254]/', 'metadata'],
    ['https://[::ffff:10.1.2.3]/', 'private'],
    ['https://[64:ff9b::a9fe:a9fe]/', 'metadata'],
    ['https://[2002:a00:1::]/', 'private'],
    ['https://[fe80::1]/', 'link-local'],
    ['https://[fc00::1]/', 'private'],
    ['https://[fd00:ec2::254]/', 'metadata'],
    ['https://[ff02::1]/', 'multicast'],
    ['https://localhost/', 'loopback'],
    ['https://api.localhost/', 'loopback'],
  ])('refuses %s (%s)', (url, reason) => {
    const check = checkEndpointUrl(url, prod);
    expect(check.ok).toBe(false);
    if (!check.ok) expect(check.message).toContain(reason);
  });

  it('refuses http, credentials, fragments, bare names and non-URLs without the development setting', () => {
    for (const url of [
      'http://example.com/hook',
      'https://u:p@example.com/',
      'https://example.com/#x',
      'https://intranet/',
      'not a url',
      'ftp://example.com/',
    ]) {
      expect(checkEndpointUrl(url, prod).ok, url).toBe(false);
    }
    expect(checkEndpointUrl('http://example.com/hook', prod)).toMatchObject({
      message: 'must be an https URL',
    });
  });

  it('accepts public https receivers', () => {
    for (const url of [
      'https://example.com/hook',
      'https://93.184.215.14/x',
      'https://[2606:4700::1111]/x',
      'https://hooks.example.co.nz:8443/a?b=c',
    ]) {
      expect(checkEndpointUrl(url, prod).ok, url).toBe(true);
    }
  });

  it('with the development setting: http and loopback, and still no private or metadata address', () => {
    expect(checkEndpointUrl('http://127.0.0.1:4000/hook', dev).ok).toBe(true);
    expect(checkEndpointUrl('http://[::1]:4000/hook', dev).ok).toBe(true);
    expect(checkEndpointUrl('http://localhost:4000/hook', dev).ok).toBe(true);
    expect(checkEndpointUrl('http://10.0.0.1/hook', dev).ok).toBe(false);
    expect(checkEndpointUrl('http://169.254.169.254/', dev).ok).toBe(false);
    expect(checkEndpointUrl('http://[::ffff:169.254.169.254]/', dev).ok).toBe(false);
  });

  it('classifies addresses, IPv4 embedded in IPv6 as the IPv4 it carries', () => {
    expect(blockedAddress('8.8.8.8')).toBeUndefined();
    expect(blockedAddress('2606:4700::1111')).toBeUndefined();
    expect(blockedAddress('::ffff:8.8.8.8')).toBeUndefined();
    expect(blockedAddress('::ffff:0a00:0001')).toBe('private');
    expect(blockedAddress('100.127.255.255')).toBe('CGNAT');
    expect(blockedAddress('100.128.0.0')).toBeUndefined();
    expect(blockedAddress('not-an-address')).toBe('not an IP address');
    expect(blockedAddress('1:2:3:4:5:6:7:8:9')).toBe('not an IP address');
  });
});

describe('webhook endpoint URLs at delivery, after resolution', () => {
  const fixed = (answers: string[]) => async () => answers;

  it('refuses a name resolving to loopback, private or metadata addresses; one bad answer among good ones too', async () => {
    const url = new URL('https://hooks.example.com/x');
    expect(await checkResolved(url, fixed(['127.0.0.1']), prod)).toMatch(/loopback/);
    expect(await checkResolved(url, fixed(['93.184.215.14', '10.0.0.7']), prod)).toMatch(/private/);
    expect(await checkResolved(url, fixed(['::ffff:169.254.169.254']), prod)).toMatch(/metadata/);
    expect(await checkResolved(url, fixed([]), prod)).toMatch(/does not resolve/);
    expect(await checkResolved(url, fixed(['93.184.215.14']), prod)).toBeUndefined();
  });

  it('the system resolver: a name that resolves to 127.0.0.1 is refused without the development setting', async () => {
    const url = new URL('https://localhost/x');
    expect(await checkResolved(url, systemResolver, prod)).toMatch(/loopback/);
    expect(await checkResolved(url, systemResolver, dev)).toBeUndefined();
  });

  it('an address literal is checked as is, without a resolver (Workers)', async () => {
    expect(await checkResolved(new URL('https://10.0.0.1/'), undefined, prod)).toMatch(/private/);
    expect(await checkResolved(new URL('https://example.com/'), undefined, prod)).toBeUndefined();
  });
});

describe('Standard Webhooks signatures', () => {
  it('signs with every secret in force; the library verifies with either, and refuses another', async () => {
    const [current, previous, stranger] = [newSigningSecret(), newSigningSecret(), newSigningSecret()];
    expect(current).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const body = JSON.stringify({ type: 'invoice.pushed', data: { id: 'x' } });
    const at = new Date();
    const headers = await signedHeaders([current, previous], 'msg_1', at, body);
    // The same bytes as the library's own signer.
    expect(headers['webhook-signature']).toBe(
      `${new Webhook(current).sign('msg_1', at, body)} ${new Webhook(previous).sign('msg_1', at, body)}`,
    );
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(new Webhook(current).verify(body, { ...headers })).toMatchObject({ type: 'invoice.pushed' });
    expect(new Webhook(previous).verify(body, { ...headers })).toMatchObject({ type: 'invoice.pushed' });
    expect(() => new Webhook(stranger).verify(body, { ...headers })).toThrow();
    expect(() => new Webhook(current).verify(`${body} `, { ...headers })).toThrow();
  });
});
