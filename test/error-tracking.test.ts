import { createErrorTracker } from '@honest-health/platform/internal/util/error-tracking';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from './support/ports.js';
import { type SentrySink, startSentrySink } from './support/sentry-sink.js';
import { spawnServer } from './support/server.js';

let sink: SentrySink;
beforeAll(async () => {
  sink = await startSentrySink();
});
afterAll(async () => {
  await sink.close();
});

describe('error tracking', () => {
  it('rejects a malformed DSN without repeating it', async () => {
    for (const dsn of ['nonsense', 'http://127.0.0.1/42', 'ftp://k@h/42', 'https://k@h/not-a-project']) {
      const error = await createErrorTracker(dsn).catch((err: unknown) => err);
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toMatch(/SENTRY_DSN is malformed/);
      expect((error as Error).message).not.toContain(dsn);
    }
  });

  it('delivers a hard boot failure to a Sentry-protocol endpoint before exiting', async () => {
    sink.items.length = 0;
    const deadPort = await freePort();
    const server = await spawnServer({
      env: { DATABASE_URL: `postgres://postgres@127.0.0.1:${deadPort}/x`, SENTRY_DSN: sink.dsn },
    });
    expect(await server.exited).toBe(1);
    const event = await sink.waitForEvent();
    // Sentry lists linked causes first and the captured exception last.
    const exception = (event.payload.exception as { values: { type: string; value: string }[] }).values.at(
      -1,
    );
    expect(exception?.type).toBe('BootFailure');
    expect(exception?.value).toMatch(/boot failed at step "open pool": ECONNREFUSED/);
    expect(event.payload.tags).toMatchObject({ step: 'open pool' });
  });

  it('redacts query parameters from wrapped driver errors', async () => {
    sink.items.length = 0;
    const tracker = await createErrorTracker(sink.dsn);
    const driverError = Object.assign(new Error('duplicate key'), { code: '23505' });
    tracker.capture(
      new Error('Failed query: insert into t values ($1)\nparams: tok_live_s3cr3t', { cause: driverError }),
    );
    expect(await tracker.flush(5000)).toBe(true);
    await sink.waitForEvent();
    expect(JSON.stringify(sink.items)).not.toContain('s3cr3t');
    expect(JSON.stringify(sink.items)).toContain('params: [redacted]');
  });
});
