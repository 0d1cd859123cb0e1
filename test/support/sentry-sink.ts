// A local HTTP endpoint that speaks Sentry's envelope protocol, so error tracking is tested for real.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

export interface SentryItem {
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
}

export interface SentrySink {
  dsn: string;
  items: SentryItem[];
  waitForEvent(timeoutMs?: number): Promise<SentryItem>;
  close(): Promise<void>;
}

export async function startSentrySink(projectId = '42'): Promise<SentrySink> {
  const items: SentryItem[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || !req.url?.startsWith(`/api/${projectId}/envelope/`)) {
        res.writeHead(404).end();
        return;
      }
      let body = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
      // Envelope: a header line, then (item header line, payload line) pairs.
      const lines = body.toString('utf8').split('\n').filter(Boolean);
      for (let i = 1; i + 1 < lines.length; i += 2) {
        items.push({ header: JSON.parse(lines[i] as string), payload: JSON.parse(lines[i + 1] as string) });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  return {
    dsn: `http://publickey@127.0.0.1:${port}/${projectId}`,
    items,
    async waitForEvent(timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const event = items.find((i) => i.header.type === 'event');
        if (event) return event;
        if (Date.now() > deadline) throw new Error('no Sentry event arrived');
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    close: () => new Promise((done) => server.close(() => done())),
  };
}
