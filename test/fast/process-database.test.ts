// Drivers are chosen by import: an entry offers the databases it bundles, the configuration picks one
// of them, and a configuration that names one the entry did not import is a configuration error.
import { ConfigError, createLogger, loadConfig, resolveIdentity } from '@honest-health/platform';
import { chooseProcessDatabase } from '@honest-health/platform/db';
import { neonDatabase } from '@honest-health/platform/drivers/neon';
import { pgDatabase } from '@honest-health/platform/drivers/pg';
import { pgliteDatabase } from '@honest-health/platform/drivers/pglite';
import { describe, expect, it } from 'vitest';
import { processDatabases } from '../../src/app/databases.js';

const URL = 'postgres://u@127.0.0.1:1/db';
const log = createLogger('error', {}, () => {});

describe('process databases', () => {
  it('picks the offered database the configuration names: PGlite without a URL, pg with one, Neon by DATABASE_DRIVER', () => {
    const pick = (env: Record<string, string>) =>
      chooseProcessDatabase(processDatabases, loadConfig(env)).name;
    expect(pick({})).toBe('pglite');
    expect(pick({ DATABASE_URL: URL })).toBe('pg');
    expect(pick({ DATABASE_URL: URL, DATABASE_DRIVER: 'neon-ws' })).toBe('neon');
    expect(pick({ DATABASE_URL: URL, DATABASE_DRIVER: 'neon-http' })).toBe('neon');
  });

  it('refuses a driver the entry did not import, naming what it offers', () => {
    const config = loadConfig({ DATABASE_URL: URL, DATABASE_DRIVER: 'neon-ws' });
    expect(() => chooseProcessDatabase([pgliteDatabase, pgDatabase], config)).toThrow(ConfigError);
    expect(() => chooseProcessDatabase([pgliteDatabase, pgDatabase], config)).toThrow(
      'DATABASE_DRIVER neon-ws is not one this entry offers (pglite, pg)',
    );
    expect(() => chooseProcessDatabase([], loadConfig({}))).toThrow('(none)');
  });

  it('each makes its own driver, named as the app is', () => {
    const identity = resolveIdentity({ name: 'shop' });
    expect(pgDatabase.createDriver(loadConfig({ DATABASE_URL: URL }), log, identity).name).toBe('pg');
    expect(
      neonDatabase.createDriver(
        loadConfig({ DATABASE_URL: URL, DATABASE_DRIVER: 'neon-http' }),
        log,
        identity,
      ).name,
    ).toBe('neon-http');
    expect(pgliteDatabase.createDriver(loadConfig({ DATABASE_URL: 'memory://' }), log, identity).name).toBe(
      'pglite',
    );
    expect(() => pgDatabase.createDriver(loadConfig({}), log, identity)).toThrow(
      'the pg driver cannot open pglite',
    );
  });
});
