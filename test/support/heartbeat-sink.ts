// A local endpoint speaking the healthchecks.io ping protocol: `<url>` success, `<url>/start`,
// `<url>/fail`. It records every ping so tests can see what a heartbeat service would have seen.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The secret part of every test heartbeat URL; the suite's secret scan fails the run if it is logged. */
export const HEARTBEAT_TEST_KEY = 'hb-ping-key-7d41c2';

export interface Ping {
  /** The check's slug, after the key. */
  check: string;
  signal: 'success' | 'start' | 'fail';
  method: string;
  at: number;
}

export interface HeartbeatSink {
  /** The ping URL of one check, holding the secret key. */
  urlFor(check: string): string;
  pings: Ping[];
  close(): Promise<void>;
}

export async function startHeartbeatSink(): Promise<HeartbeatSink> {
  const pings: Ping[] = [];
  const server = createServer((req, res) => {
    const parts = new URL(req.url ?? '/', 'http://sink').pathname.split('/').filter(Boolean);
    if (parts[0] !== HEARTBEAT_TEST_KEY || !parts[1] || parts.length > 3) {
      res.writeHead(404).end('not found');
      return;
    }
    const last = parts[2];
    const signal = last === undefined ? 'success' : last === 'start' || last === 'fail' ? last : undefined;
    if (!signal) {
      res.writeHead(400).end('bad signal');
      return;
    }
    pings.push({ check: parts[1], signal, method: req.method ?? '', at: Date.now() });
    res.writeHead(200, { 'content-type': 'text/plain' }).end('OK');
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  return {
    urlFor: (check) => `http://127.0.0.1:${port}/${HEARTBEAT_TEST_KEY}/${check}`,
    pings,
    close: () =>
      new Promise((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}
