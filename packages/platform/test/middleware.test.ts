// The piece an app with its own entry mounts: readiness by a write probe, and dispose-and-retry-once on
// the request path, over a driver whose pools answer as a demoted primary does (SQLSTATE 25006).
import { createLogger, type Database, type DatabaseDriver, type DatabasePool } from '@honest-health/platform';
import {
  createDatabaseHealth,
  type DatabaseVariables,
  databaseMiddleware,
  readinessHandler,
} from '@honest-health/platform/middleware';
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';

const readOnly = () =>
  Object.assign(new Error('cannot execute INSERT in a read-only transaction'), { code: '25006' });

/** Pools that fail with 25006 while `state.readOnly`; each pool's `db` names its generation. */
function fakeDriver(state: { readOnly: boolean }) {
  const built: string[] = [];
  const ended: string[] = [];
  const driver: DatabaseDriver = {
    name: 'fake',
    createPool(role): DatabasePool {
      const id = `${role}#${built.filter((b) => b.startsWith(role)).length + 1}`;
      built.push(id);
      return {
        db: { id } as unknown as Database,
        async query<R>() {
          if (state.readOnly) throw readOnly();
          return { rows: [{ in_recovery: false, read_only: 'off' } as R] };
        },
        withSession: () => Promise.reject(new Error('not used')),
        stats: () => ({ total: 0, idle: 0, waiting: 0 }),
        async end() {
          ended.push(id);
        },
      };
    },
    ready: async () => {},
    close: async () => {},
  };
  return { driver, built, ended };
}

const quiet = createLogger('error', {}, () => {});
const poolOf = (db: Database) => (db as unknown as { id: string }).id;

describe('the database health middleware', () => {
  it('/readyz proves a write; a read-only answer is 503 and disposes both pools', async () => {
    const state = { readOnly: false };
    const { driver, built, ended } = fakeDriver(state);
    const health = await createDatabaseHealth({ driver, instanceId: 'test', log: quiet });
    const app = new Hono().get('/readyz', readinessHandler(health));

    const ok = await app.request('/readyz');
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ status: 'ok', checks: { database: 'ok' } });

    await health.withDatabase(async (db) => poolOf(db));
    state.readOnly = true;
    const down = await app.request('/readyz?verbose');
    expect(down.status).toBe(503);
    expect(await down.json()).toMatchObject({
      status: 'unavailable',
      checks: { database: 'read_only' },
      details: { database: { reason: '25006' } },
    });
    await new Promise((r) => setTimeout(r, 0));
    expect(ended.sort()).toEqual(['app#1', 'probe#1']);

    state.readOnly = false;
    expect((await app.request('/readyz')).status).toBe(200);
    expect(built).toContain('probe#2');

    // Draining answers at once, whatever the database would say.
    let draining = false;
    const drained = new Hono().get('/readyz', readinessHandler(health, { draining: () => draining }));
    expect((await drained.request('/readyz')).status).toBe(200);
    draining = true;
    const answer = await drained.request('/readyz');
    expect(answer.status).toBe(503);
    expect(await answer.json()).toEqual({ status: 'unavailable', checks: { server: 'draining' } });
    await health.close();
  });

  it('a route poisoned once runs again on a fresh pool; poisoned twice, it answers 503 with Retry-After', async () => {
    const { driver } = fakeDriver({ readOnly: false });
    const health = await createDatabaseHealth({ driver, instanceId: 'test', log: quiet });
    let failures = 0;
    const app = new Hono<{ Variables: DatabaseVariables }>()
      .use(databaseMiddleware(health))
      .get('/notes', async (c) => {
        const pool = await c.var.withDatabase(async (db) => {
          if (failures > 0) {
            failures -= 1;
            throw new Error('query failed', { cause: readOnly() });
          }
          return poolOf(db);
        });
        return c.json({ pool });
      })
      // The app's own error handler answers 500; the middleware turns a failover's error into a 503.
      .onError((_err, c) => c.text('internal error', 500));

    failures = 1;
    const retried = await app.request('/notes');
    expect(retried.status).toBe(200);
    expect(await retried.json()).toEqual({ pool: 'app#2' });

    failures = 2;
    const unavailable = await app.request('/notes');
    expect(unavailable.status).toBe(503);
    expect(unavailable.headers.get('retry-after')).toBe('1');
    expect(await unavailable.json()).toMatchObject({ error: { code: 'database_unavailable' } });
    await health.close();
  });
});
