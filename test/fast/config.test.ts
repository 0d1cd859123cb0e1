import { ConfigError, loadConfig } from '@honest-health/platform';
import { describe, expect, it } from 'vitest';
import { loadAppConfig } from '../../src/app/config.js';

describe('configuration', () => {
  it('defaults to the embedded database and documented values', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      database: { driver: 'pglite', dataDir: '.data/pglite' },
      poolMax: 10,
      poolMaxLifetimeSeconds: 300,
      probeTimeoutMs: 2000,
      shutdownTimeoutMs: 25_000,
      logLevel: 'info',
    });
    expect(loadConfig({ DATABASE_URL: 'memory://' }).database).toEqual({
      driver: 'pglite',
      dataDir: 'memory://',
    });
    expect(loadConfig({ DATABASE_URL: 'postgresql://u@h/db' }).database).toEqual({
      driver: 'pg',
      url: 'postgresql://u@h/db',
    });
  });

  it('names every bad variable in one error and never echoes a value', () => {
    const secret = 'postgres-but-not://user:hunter2@db';
    let error: unknown;
    try {
      loadConfig({
        PORT: '80a',
        DATABASE_URL: secret,
        POOL_MAX: '0',
        LOG_LEVEL: 'loud',
        PROBE_TIMEOUT_MS: '-1',
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const { message, problems } = error as ConfigError;
    expect(problems.map((p) => p.split(' ')[0]).sort()).toEqual(
      ['DATABASE_URL', 'LOG_LEVEL', 'POOL_MAX', 'PORT', 'PROBE_TIMEOUT_MS'].sort(),
    );
    expect(message).not.toContain('hunter2');
    expect(message).not.toContain('80a');
  });

  it('asks Xero for the granular invoices scope by default, and refuses scopes that cannot push', () => {
    expect(loadAppConfig({}).xero.scopes).toBe('offline_access accounting.invoices');
    expect(loadAppConfig({ XERO_SCOPES: 'offline_access accounting.transactions' }).xero.scopes).toBe(
      'offline_access accounting.transactions',
    );
    for (const scopes of ['accounting.invoices', 'offline_access accounting.contacts']) {
      expect(() => loadAppConfig({ XERO_SCOPES: scopes })).toThrow(/XERO_SCOPES/);
    }
  });

  it('takes previous token keys, comma-separated, only beside TOKEN_ENCRYPTION_KEY, naming the variable', () => {
    const key = (n: number) => Buffer.alloc(32, n).toString('base64');
    expect(loadAppConfig({}).previousTokenEncryptionKeys).toEqual([]);
    expect(
      loadAppConfig({
        TOKEN_ENCRYPTION_KEY: key(1),
        TOKEN_ENCRYPTION_KEYS_PREVIOUS: ` ${key(2)} ,${key(3)},`,
      }).previousTokenEncryptionKeys,
    ).toEqual([key(2), key(3)]);
    expect(() =>
      loadAppConfig({ TOKEN_ENCRYPTION_KEY: key(1), TOKEN_ENCRYPTION_KEYS_PREVIOUS: `${key(2)},nope` }),
    ).toThrow(
      /^invalid configuration: TOKEN_ENCRYPTION_KEYS_PREVIOUS must be comma-separated keys of 32 bytes, base64-encoded \(openssl rand -base64 32\)$/,
    );
    expect(() => loadAppConfig({ TOKEN_ENCRYPTION_KEYS_PREVIOUS: key(2) })).toThrow(
      /TOKEN_ENCRYPTION_KEYS_PREVIOUS needs TOKEN_ENCRYPTION_KEY \(the key that seals\) beside it/,
    );
  });

  it('validates MIGRATION_LOCK_TIMEOUT_MS and DATABASE_POOLER', () => {
    expect(loadConfig({})).toMatchObject({ migrationLockTimeoutMs: 120_000, databasePooler: 'auto' });
    expect(loadConfig({ MIGRATION_LOCK_TIMEOUT_MS: '0', DATABASE_POOLER: 'transaction' })).toMatchObject({
      migrationLockTimeoutMs: 0,
      databasePooler: 'transaction',
    });
    expect(() => loadConfig({ MIGRATION_LOCK_TIMEOUT_MS: '2m', DATABASE_POOLER: 'statement' })).toThrow(
      /MIGRATION_LOCK_TIMEOUT_MS must be an integer from 0 to 3600000; DATABASE_POOLER must be one of auto, session, transaction/,
    );
  });

  it("keeps idle grants alive every 7 days by default, from 1 to 30 days, well inside Xero's 60", () => {
    expect(loadAppConfig({}).refreshKeepAliveMs).toBe(7 * 86_400_000);
    expect(loadAppConfig({ XERO_REFRESH_KEEP_ALIVE_DAYS: '30' }).refreshKeepAliveMs).toBe(30 * 86_400_000);
    for (const days of ['0', '31', '60', '7.5']) {
      expect(() => loadAppConfig({ XERO_REFRESH_KEEP_ALIVE_DAYS: days })).toThrow(
        /XERO_REFRESH_KEEP_ALIVE_DAYS must be an integer from 1 to 30/,
      );
    }
  });

  it("bounds the invoice bytes a claim returns: 4 MiB by default, 2 to 8 MiB, under neon-http's 10 MB", () => {
    expect(loadAppConfig({}).pushClaimMaxPayloadBytes).toBe(4 * 1024 * 1024);
    expect(loadAppConfig({ PUSH_CLAIM_MAX_PAYLOAD_BYTES: '2097152' }).pushClaimMaxPayloadBytes).toBe(2097152);
    for (const bytes of ['1048576', '10000000']) {
      expect(() => loadAppConfig({ PUSH_CLAIM_MAX_PAYLOAD_BYTES: bytes })).toThrow(
        /PUSH_CLAIM_MAX_PAYLOAD_BYTES/,
      );
    }
  });

  it('treats empty variables as unset', () => {
    expect(loadConfig({ PORT: '', DATABASE_URL: '' })).toMatchObject({
      port: 8080,
      database: { driver: 'pglite' },
    });
  });

  it('reads a renamed variable under its old name for one release, and says so', () => {
    const old = loadAppConfig({ REGISTRY_REFRESH_MS: '250', REQUEST_BODY_BUDGET_BYTES: '2097152' });
    expect(old.apiKeyRefreshMs).toBe(250);
    expect(old.limits.bodiesMaxBytes).toBe(2_097_152);
    expect(old.deprecatedVariables).toEqual([
      { variable: 'REGISTRY_REFRESH_MS', use: 'API_KEY_REFRESH_MS' },
      { variable: 'REQUEST_BODY_BUDGET_BYTES', use: 'REQUEST_BODIES_MAX_BYTES' },
    ]);
    // Both names with one value: no conflict, still a warning.
    const both = loadAppConfig({ REGISTRY_REFRESH_MS: '250', API_KEY_REFRESH_MS: '250' });
    expect(both.apiKeyRefreshMs).toBe(250);
    expect(both.deprecatedVariables).toHaveLength(1);
    expect(loadAppConfig({ API_KEY_REFRESH_MS: '250' }).deprecatedVariables).toEqual([]);
    // An old name's bad value is named by the new name, which is what the operator should set.
    expect(() => loadAppConfig({ REGISTRY_REFRESH_MS: 'soon' })).toThrow(
      /API_KEY_REFRESH_MS must be an integer/,
    );
  });

  it('fails on an old and a new name that disagree, naming both with the other problems, never a value', () => {
    let error: unknown;
    try {
      loadAppConfig({ REGISTRY_REFRESH_MS: '250', API_KEY_REFRESH_MS: '999', PUSH_BATCH_SIZE: '0' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const { problems, message } = error as ConfigError;
    expect(problems).toHaveLength(2);
    expect(problems[0]).toBe(
      'REGISTRY_REFRESH_MS is the old name of API_KEY_REFRESH_MS, which is set to another value: set only API_KEY_REFRESH_MS',
    );
    expect(problems[1]).toMatch(/^PUSH_BATCH_SIZE /);
    expect(message).not.toMatch(/250|999/);
  });
});
