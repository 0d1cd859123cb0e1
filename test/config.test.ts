import { describe, expect, it } from 'vitest';
import { spawnServer } from './support/server.js';

// The parsing itself is checked in test/fast/config.test.ts; this is the process failing boot.
describe('configuration', () => {
  it('fails boot with exit 1 and one line naming PORT and DATABASE_URL', async () => {
    const server = await spawnServer({ env: { PORT: 'abc', DATABASE_URL: 'nonsense' } });
    expect(await server.exited).toBe(1);
    const errors = server.logs.filter((l) => l.level === 'error');
    expect(errors).toHaveLength(1);
    expect(errors[0]?.msg).toMatch(/PORT .*DATABASE_URL|DATABASE_URL .*PORT/);
    expect(server.output).toEqual([]);
  });
});
