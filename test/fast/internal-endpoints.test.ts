// The guard on /metrics and /healthz/ticks (packages/platform/src/http/internal-endpoints.ts) and the transport
// rule on Xero's URLs (src/app/config.ts): both refuse boot in the one-line configuration error.

import { ConfigError, loadConfig } from '@honest-health/platform';
import {
  isLoopbackHost,
  loadInternalEndpointsConfig,
} from '@honest-health/platform/internal/http/internal-endpoints';
import { describe, expect, it } from 'vitest';
import { loadAppConfig } from '../../src/app/config.js';

const problems = (load: () => unknown): string[] => {
  try {
    load();
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
};

describe('internal endpoints guard', () => {
  it('knows loopback: 127.0.0.0/8, ::1 and localhost, nothing else', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost'])
      expect(isLoopbackHost(host)).toBe(true);
    for (const host of ['0.0.0.0', '::', '10.0.0.1', 'fly-local-6pn', '128.0.0.1', 'localhost.example.com'])
      expect(isLoopbackHost(host), host).toBe(false);
  });

  it('refuses a HOST beyond loopback (the default 0.0.0.0 beside a database server too) with neither guard, naming both', () => {
    const db = 'postgres://app@db.internal/app';
    for (const env of [
      { DATABASE_URL: db },
      { HOST: '0.0.0.0' },
      { HOST: '::' },
      { HOST: '10.1.2.3', METRICS_TOKEN: '' },
    ]) {
      const found = problems(() => loadInternalEndpointsConfig(env));
      expect(found, JSON.stringify(env)).toHaveLength(1);
      expect(found[0]).toMatch(/^METRICS_PORT or METRICS_TOKEN is required when HOST is not loopback/);
      expect(found[0]).toContain('METRICS_PUBLIC=true');
    }
  });

  it('takes a token, an internal port, an explicit opt-out, or a loopback HOST', () => {
    expect(loadInternalEndpointsConfig({ HOST: '0.0.0.0', METRICS_TOKEN: 'secret' })).toEqual({
      port: undefined,
    });
    expect(loadInternalEndpointsConfig({ HOST: '0.0.0.0', METRICS_PORT: '9091' })).toEqual({ port: 9091 });
    expect(loadInternalEndpointsConfig({ HOST: '0.0.0.0', METRICS_PUBLIC: 'true' })).toEqual({
      port: undefined,
    });
    expect(loadInternalEndpointsConfig({ HOST: '127.0.0.1' })).toEqual({ port: undefined });
    // The embedded database's default HOST is loopback: `npm start` needs no guard.
    expect(loadInternalEndpointsConfig({})).toEqual({ port: undefined });
    expect(loadConfig({}).host).toBe('127.0.0.1');
    expect(loadConfig({ DATABASE_URL: 'postgres://app@db.internal/app' }).host).toBe('0.0.0.0');
  });

  it('refuses a METRICS_PORT equal to PORT, a bad one, and an opt-out other than true', () => {
    expect(problems(() => loadInternalEndpointsConfig({ PORT: '9000', METRICS_PORT: '9000' }))).toEqual([
      'METRICS_PORT must differ from PORT',
    ]);
    expect(problems(() => loadInternalEndpointsConfig({ HOST: '127.0.0.1', METRICS_PORT: 'x' }))[0]).toMatch(
      /^METRICS_PORT must be an integer/,
    );
    expect(problems(() => loadInternalEndpointsConfig({ HOST: '0.0.0.0', METRICS_PUBLIC: 'yes' }))).toContain(
      'METRICS_PUBLIC must be true or unset',
    );
  });
});

describe('Xero URLs', () => {
  const names = ['XERO_API_URL', 'XERO_IDENTITY_URL', 'XERO_AUTHORIZE_URL', 'XERO_REDIRECT_URI'];

  it('refuse http:// to any host but loopback, naming each variable', () => {
    const env = Object.fromEntries(names.map((n) => [n, 'http://xero.internal:4010/x']));
    const found = problems(() => loadAppConfig(env));
    expect(found.map((p) => p.split(' ')[0])).toEqual(names);
    for (const p of found) expect(p).toContain('must be an https:// URL');
    // Never the value: a URL may carry credentials.
    expect(found.join(' ')).not.toContain('xero.internal');
    for (const host of ['10.0.0.5', '0.0.0.0', '[::]', 'localhost.evil.com', '127.0.0.1.nip.io']) {
      expect(
        problems(() => loadAppConfig({ XERO_API_URL: `http://${host}/` })),
        host,
      ).toHaveLength(1);
    }
  });

  it('take https:// anywhere and http:// on loopback (the local sandbox)', () => {
    for (const url of [
      'https://api.xero.com',
      'https://xero.internal:8443',
      'http://127.0.0.1:4010',
      'http://127.9.9.9:4010',
      'http://localhost:4010',
      'http://[::1]:4010',
    ]) {
      expect(
        loadAppConfig({ XERO_API_URL: url, XERO_IDENTITY_URL: `${url}/identity` }).xero.apiUrl,
        url,
      ).toBe(url);
    }
    expect(loadAppConfig({}).xero.redirectUri).toBe('http://localhost:8080/connect/xero/callback');
  });
});
