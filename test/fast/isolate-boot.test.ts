// The Worker's isolate boot (packages/platform/src/runtimes/worker.ts) without workerd or a database: a boot
// that fails on its configuration runs once however many requests arrive together, is retried only
// after its back-off (1 s, 5 s, then every 30 s), and meanwhile every request is answered at once.
// test/worker.test.ts runs the same lifecycle in workerd against real databases.

import type { AppModule } from '@honest-health/platform';
import { neonIsolateDatabase } from '@honest-health/platform/drivers/neon';
import { createIsolateHandlers } from '@honest-health/platform/worker';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { honestHealth } from '../../src/app/module.js';

const ctx = { waitUntil: () => {} };
// No DATABASE_URL: the isolate cannot be configured, and never reaches for a database.
const bindings = { LOG_LEVEL: 'error' };

/** The app module, counting its boots (each one reads the app's configuration once). */
function counted() {
  let boots = 0;
  const module: AppModule<unknown> = {
    ...(honestHealth as unknown as AppModule<unknown>),
    loadConfig: (env) => {
      boots += 1;
      return honestHealth.loadConfig(env);
    },
  };
  return {
    handlers: createIsolateHandlers(module, { databases: [neonIsolateDatabase] }),
    boots: () => boots,
  };
}

const request = (path: string) => new Request(`https://worker.example${path}`);

describe('isolate boot', () => {
  let now = Date.parse('2026-12-01T12:00:00Z');
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(now);
    vi.spyOn(console, 'log').mockImplementation(() => {});
  });
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });
  const advance = (ms: number) => {
    now += ms;
    vi.setSystemTime(now);
  };

  it('answers liveness without booting', async () => {
    const { handlers, boots } = counted();
    const res = await handlers.fetch(request('/livez'), bindings, ctx);
    expect(res.status).toBe(200);
    expect(boots()).toBe(0);
  });

  it('runs one boot for 20 concurrent first requests, and says why it failed', async () => {
    const { handlers, boots } = counted();
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        handlers.fetch(request(i % 2 ? '/readyz' : '/api/invoices'), bindings, ctx),
      ),
    );
    expect(boots()).toBe(1);
    expect(answers.map((r) => r.status)).toEqual(Array(20).fill(503));
    expect(await answers[1]?.json()).toEqual({
      status: 'unavailable',
      checks: { boot: 'failed', database: 'not_checked' },
    });
    expect(await answers[0]?.json()).toMatchObject({ error: { code: 'not_ready' } });
  });

  it('retries after 1 s, 5 s, then every 30 s, answering Retry-After in between', async () => {
    const { handlers, boots } = counted();
    const api = () => handlers.fetch(request('/api/invoices'), bindings, ctx);
    expect((await api()).headers.get('retry-after')).toBe('1');
    for (const [wait, retryAfter] of [
      [1000, '5'],
      [5000, '30'],
      [30_000, '30'],
      [30_000, '30'],
    ] as const) {
      const before = boots();
      advance(wait - 1);
      expect((await api()).status).toBe(503);
      expect(boots(), `still backing off, ${wait - 1} ms after a failure`).toBe(before);
      advance(1);
      // The retry fails again; its answer carries the next wait.
      expect((await api()).headers.get('retry-after')).toBe(retryAfter);
      expect(boots()).toBe(before + 1);
    }
  });
});
