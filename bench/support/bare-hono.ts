// The baseline: a hello-world Hono app on @hono/node-server, run as its own process by the benchmark
// (`node --import tsx bench/support/bare-hono.ts`, PORT and HOST from the environment).
import { serve } from '@hono/node-server';
import { Hono } from 'hono';

const app = new Hono();
app.get('/livez', (c) => c.json({ status: 'ok' }));

serve(
  { fetch: app.fetch, port: Number(process.env.PORT ?? 0), hostname: process.env.HOST ?? '127.0.0.1' },
  (info) => console.log(JSON.stringify({ level: 'info', msg: 'listening', port: info.port })),
);

for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => process.exit(0));
