import { describe, expect, it } from 'vitest';
import { spawnServer } from './support/server.js';

// The parsing itself is checked in packages/platform/test/http-config.test.ts; this is the process failing boot.
describe('HTTP limits configuration', () => {
  it('fails boot with one line naming the bad variable', async () => {
    const server = await spawnServer({ env: { DATABASE_URL: 'memory://', HTTP_IDLE_TIMEOUT_MS: 'soon' } });
    expect(await server.exited).toBe(1);
    const line = server.logs.find((l) => l.level === 'error');
    expect(line?.msg).toMatch(/^invalid configuration: HTTP_IDLE_TIMEOUT_MS must be an integer/);
  });
});
