// Which database a Worker entry's isolate reaches, from its bindings (packages/platform/src/runtimes/worker-*.ts).

import { createLogger, loadConfig } from '@honest-health/platform';
import { hyperdriveIsolateDatabase } from '@honest-health/platform/drivers/hyperdrive';
import { neonIsolateDatabase } from '@honest-health/platform/drivers/neon';
import { describe, expect, it } from 'vitest';

const binding = { connectionString: 'postgres://u:secret-pw@hyperdrive.local:5432/app' };
const log = createLogger('error', {}, () => {});

describe('the Hyperdrive isolate database', () => {
  it('wins over DATABASE_URL and DATABASE_DRIVER when the binding is present', () => {
    const found = hyperdriveIsolateDatabase().detect({
      HYPERDRIVE: binding,
      DATABASE_URL: 'postgres://elsewhere/db',
      DATABASE_DRIVER: 'neon-ws',
    });
    expect(found?.overrides).toEqual({ DATABASE_DRIVER: 'pg', DATABASE_URL: binding.connectionString });
  });

  it('is absent without the binding, or with a binding that is not Hyperdrive', () => {
    const hyperdrive = hyperdriveIsolateDatabase();
    expect(hyperdrive.detect({ DATABASE_URL: 'postgres://db/app' })).toBeUndefined();
    expect(hyperdrive.detect({ HYPERDRIVE: 'postgres://a-string/app' })).toBeUndefined();
    expect(hyperdrive.detect({ HYPERDRIVE: { connectionString: '' } })).toBeUndefined();
    expect(hyperdriveIsolateDatabase('DB').detect({ DB: binding })?.overrides).toMatchObject({
      DATABASE_URL: binding.connectionString,
    });
  });

  it('makes a hyperdrive driver from the binding of the invocation', () => {
    const config = loadConfig({ DATABASE_DRIVER: 'pg', DATABASE_URL: binding.connectionString });
    expect(hyperdriveIsolateDatabase().createDriver(config, { HYPERDRIVE: binding }, log).name).toBe(
      'hyperdrive',
    );
    expect(() => hyperdriveIsolateDatabase().createDriver(config, {}, log)).toThrow(
      /HYPERDRIVE_UNCACHED \(or HYPERDRIVE\) Hyperdrive binding is missing/,
    );
  });

  it('takes the uncached binding for everything that decides, the cached one only for harmless reads', () => {
    const uncached = { connectionString: 'postgres://u:secret-pw@hyperdrive-uncached.local:5432/app' };
    const hyperdrive = hyperdriveIsolateDatabase();
    const both = { HYPERDRIVE: binding, HYPERDRIVE_UNCACHED: uncached };
    expect(hyperdrive.detect(both)?.overrides?.DATABASE_URL).toBe(uncached.connectionString);
    expect(hyperdrive.detect({ HYPERDRIVE_UNCACHED: uncached })?.overrides?.DATABASE_URL).toBe(
      uncached.connectionString,
    );
    const config = loadConfig({ DATABASE_DRIVER: 'pg', DATABASE_URL: uncached.connectionString });
    expect(hyperdrive.createCachedDriver?.(config, both, log)?.name).toBe('hyperdrive');
    expect(hyperdrive.warnings?.(both)).toEqual([]);
    // One binding: no cached driver (its reads take the one binding), and a warning that names it.
    expect(hyperdrive.createCachedDriver?.(config, { HYPERDRIVE: binding }, log)).toBeUndefined();
    expect(hyperdrive.createCachedDriver?.(config, { HYPERDRIVE_UNCACHED: uncached }, log)).toBeUndefined();
    expect(hyperdrive.warnings?.({ HYPERDRIVE: binding })).toEqual([
      expect.stringMatching(
        /^HYPERDRIVE_UNCACHED is not bound: every read, deciding ones too, goes through HYPERDRIVE/,
      ),
    ]);
  });
});

describe('the Neon isolate database', () => {
  it('needs no binding and defaults the driver to neon-ws under the Worker vars', () => {
    expect(neonIsolateDatabase.detect({})).toEqual({ defaults: { DATABASE_DRIVER: 'neon-ws' } });
    const config = loadConfig({
      DATABASE_DRIVER: 'neon-ws',
      DATABASE_URL: 'postgres://u@db.neon.invalid/app',
    });
    expect(neonIsolateDatabase.createDriver(config, {}, log).name).toBe('neon-ws');
  });
});
