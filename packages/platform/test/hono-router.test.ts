import { Hono } from '@honest-health/platform';
import { Hono as HonoDefault } from 'hono';
import { describe, expect, it } from 'vitest';

// The platform's Hono is TrieRouter alone (src/http/hono.ts, docs/worker-bundle.md): it must route as
// hono's default (SmartRouter over RegExpRouter and TrieRouter) does, on the shapes our tables use.
function table(app: HonoDefault | Hono) {
  const api = new Hono();
  api.get('/', (c) => c.text('list'));
  api.get('/:id', (c) => c.text(`get ${c.req.param('id')}`));
  api.post('/:id/choose', (c) => c.text(`choose ${c.req.param('id')}`));
  api.all('/', (c) => c.text('405 list'));
  api.all('/:id', (c) => c.text('405 one'));
  app.use('*', async (c, next) => {
    await next();
    c.header('x-route', c.req.routePath);
  });
  app.get('/livez', (c) => c.text('live'));
  app.route('/api/invoices', api);
  app.notFound((c) => c.text('none', 404));
  return app;
}

const requests: [string, string][] = [
  ['GET', '/livez'],
  ['GET', '/livez/'],
  ['GET', '/api/invoices'],
  ['GET', '/api/invoices/'],
  ['GET', '/api/invoices/a%20b'],
  ['GET', '/api/invoices/abc/'],
  ['POST', '/api/invoices/abc/choose'],
  ['POST', '/api/invoices/abc/choose/'],
  ['DELETE', '/api/invoices/abc'],
  ['PUT', '/api/invoices'],
  ['GET', '/api/invoices/abc/def'],
  ['GET', '/nowhere'],
];

describe('the platform Hono', () => {
  it('uses TrieRouter', () => {
    expect(new Hono().router.name).toBe('TrieRouter');
  });

  it('routes every request as hono’s default router does, trailing slashes strict', async () => {
    const ours = table(new Hono());
    const theirs = table(new HonoDefault());
    for (const [method, path] of requests) {
      const [a, b] = await Promise.all(
        [ours, theirs].map(async (app) => {
          const res = await app.request(path, { method });
          return { status: res.status, body: await res.text(), route: res.headers.get('x-route') };
        }),
      );
      expect(a, `${method} ${path}`).toEqual(b);
    }
    expect((await ours.request('/livez/')).status).toBe(404);
    expect(await (await ours.request('/api/invoices/a%20b')).text()).toBe('get a b');
  });
});
