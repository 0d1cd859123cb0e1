// The request-body budget: a declared body past it is refused before it is read, a chunked one is cut
// as it crosses, and what a request reserved is given back when it is answered, however it ended.
import { BodyBudget, Hono, limitBodies } from '@honest-health/platform';
import { describe, expect, it } from 'vitest';

function app(budget: BodyBudget, gate?: Promise<void>) {
  const routes = new Hono();
  // The handler's read fails on a cut body; the middleware's answer replaces whatever this says.
  routes.onError((_, c) => c.json({ error: 'read failed' }, 400));
  let read = 0;
  routes.post(
    '/',
    limitBodies({ budget, maxBodyBytes: 1000, tooLarge: (c) => c.json({ error: 'too_large' }, 413) }),
    async (c) => {
      const text = await c.req.text();
      read += 1;
      await gate;
      return c.json({ bytes: text.length, inFlight: budget.inFlight }, 202);
    },
  );
  return { routes, reads: () => read };
}

const declared = (n: number) =>
  new Request('http://x/', { method: 'POST', body: 'a'.repeat(n), headers: { 'content-length': String(n) } });

function chunked(sizes: number[]): Request {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const n of sizes) controller.enqueue(new Uint8Array(n).fill(97));
      controller.close();
    },
  });
  return new Request('http://x/', {
    method: 'POST',
    body,
    headers: { 'transfer-encoding': 'chunked' },
    duplex: 'half',
  } as RequestInit);
}

describe('limitBodies', () => {
  it('admits bodies within the budget, counts them while handled and gives them back', async () => {
    const budget = new BodyBudget(1500);
    const { routes } = app(budget);
    const res = await routes.request(declared(800));
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ bytes: 800, inFlight: 800 });
    expect(budget.inFlight).toBe(0);
  });

  it('answers 503 with Retry-After, before reading, when the declared body would cross the budget', async () => {
    const budget = new BodyBudget(1500);
    let open!: () => void;
    const { routes, reads } = app(
      budget,
      new Promise((done) => {
        open = done;
      }),
    );
    const first = routes.request(declared(900));
    await new Promise((done) => setTimeout(done, 10));
    const second = await routes.request(declared(900));
    expect(second.status).toBe(503);
    expect(second.headers.get('retry-after')).toBe('1');
    expect(second.headers.get('connection')).toBe('close');
    expect(await second.json()).toMatchObject({ error: { code: 'server_busy' } });
    expect(reads()).toBe(1);
    open();
    expect((await first).status).toBe(202);
    expect(budget.inFlight).toBe(0);
    expect((await routes.request(declared(900))).status).toBe(202);
  });

  it('refuses a declared body over the one-body limit with the app’s 413', async () => {
    const budget = new BodyBudget(5000);
    const { routes, reads } = app(budget);
    const res = await routes.request(declared(1001));
    expect(res.status).toBe(413);
    expect(reads()).toBe(0);
    expect(budget.inFlight).toBe(0);
  });

  it('counts a chunked body as it streams, cuts it when it crosses, and releases what it held', async () => {
    const budget = new BodyBudget(700);
    const { routes } = app(budget);
    expect((await routes.request(chunked([300, 300]))).status).toBe(202);
    const over = await routes.request(chunked([300, 300, 300]));
    expect(over.status).toBe(503);
    expect(over.headers.get('retry-after')).toBe('1');
    expect(budget.inFlight).toBe(0);
    const big = new BodyBudget(5000);
    expect((await app(big).routes.request(chunked([600, 600]))).status).toBe(413);
    expect(big.inFlight).toBe(0);
  });
});
