import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@honest-health/platform';
import { describe, expect, it, onTestFinished } from 'vitest';
import { loadHttpConfig } from '../src/http/config.js';
import { connectionCap, descriptorLimit } from '../src/http/connection-cap.js';

describe('HTTP limits configuration', () => {
  it('has deliberate defaults', () => {
    expect(loadHttpConfig({})).toEqual({
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 5000,
      idleTimeoutMs: 30_000,
      maxConnections: 'auto',
    });
    expect(loadHttpConfig({ HTTP_MAX_CONNECTIONS: '500' }).maxConnections).toBe(500);
  });

  it('names every bad variable', () => {
    let error: unknown;
    try {
      loadHttpConfig({
        HTTP_HEADERS_TIMEOUT_MS: '10s',
        HTTP_REQUEST_TIMEOUT_MS: '0',
        HTTP_KEEP_ALIVE_TIMEOUT_MS: '-1',
        HTTP_IDLE_TIMEOUT_MS: '300000', // above Bun's 255 s
        HTTP_MAX_CONNECTIONS: 'lots',
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.map((p) => p.split(' ')[0]);
    expect(problems).toEqual([
      'HTTP_HEADERS_TIMEOUT_MS',
      'HTTP_REQUEST_TIMEOUT_MS',
      'HTTP_KEEP_ALIVE_TIMEOUT_MS',
      'HTTP_IDLE_TIMEOUT_MS',
      'HTTP_MAX_CONNECTIONS',
    ]);
    expect(() =>
      loadHttpConfig({ HTTP_HEADERS_TIMEOUT_MS: '20000', HTTP_REQUEST_TIMEOUT_MS: '10000' }),
    ).toThrow('HTTP_HEADERS_TIMEOUT_MS must not be above HTTP_REQUEST_TIMEOUT_MS');
  });

  it('caps connections below the descriptor limit, keeping a reserve', () => {
    const dir = mkdtempSync(join(tmpdir(), 'limits-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'limits');
    writeFileSync(
      file,
      'Limit                     Soft Limit           Hard Limit           Units     \n' +
        'Max open files            1024                 524288               files     \n',
    );
    expect(descriptorLimit(file)).toBe(1024);
    expect(descriptorLimit(join(dir, 'missing'))).toBeUndefined();
    expect(connectionCap('auto', 1024)).toEqual({
      max: 921,
      source: 'descriptor limit',
      descriptorLimit: 1024,
    });
    expect(connectionCap('auto', 256).max).toBe(192);
    expect(connectionCap('auto', 65_536).max).toBe(58_982);
    expect(connectionCap(100, 1024).max).toBe(100);
    expect(connectionCap('auto', undefined)).toEqual({
      max: undefined,
      source: 'none',
      descriptorLimit: undefined,
    });
  });
});
